/**
 * Changes to who a token acts for (a key revoked, a member deactivated, a role or access policy
 * changed) told to every gateway replica at once, through LISTEN/NOTIFY on the gateway's own
 * PostgreSQL database (docs/decisions.md, "Auth cache and revocation"). The replica that served an
 * identity mutation clears its own auth cache and notifies before it answers; every replica clears
 * its cache when the notification arrives (milliseconds later). While a replica listens, its
 * writes may use the auth cache as its reads do; once its listening connection is lost, writes ask
 * identity every time again until it listens anew (its cache cleared then: nothing said meanwhile
 * is missed), and reads fall back to the cache's TTL alone.
 */
import pg from 'pg';
import type { Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';

/** The channel every gateway replica listens on (one gateway database per installation). */
export const AUTH_CHANGES_CHANNEL = 'workauto_gateway_auth_changed';
/** How long a replica waits before listening again after its connection was lost. */
const RELISTEN_MS = 1_000;

export class AuthChanges {
  private client: pg.Client | undefined;
  private listening = false;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly pool: Pool,
    /** Forgets every cached principal (Authenticator.clear). */
    private readonly clear: () => void,
    private readonly logger: Logger,
  ) {}

  /** Whether a change served by any replica reaches this one as it happens: then writes may use the cache. */
  get live(): boolean {
    return this.listening;
  }

  /** Starts listening; a failure is retried every second (meanwhile writes ask identity every time). */
  async start(): Promise<void> {
    await this.listen();
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'gateway auth changes' });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) {
        this.client = undefined;
        this.listening = false;
        this.logger.warn(
          { err: err?.message },
          'lost the connection that tells this gateway of revoked keys: writes ask identity every time until it is back',
        );
      }
      client.end().catch(() => undefined);
      this.relisten();
    };
    client.on('notification', () => this.clear());
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      await client.query(`LISTEN ${AUTH_CHANGES_CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped || lost) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.clear(); // whatever changed while this replica was not listening
    this.listening = true;
  }

  private relisten(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.listen();
    }, RELISTEN_MS);
    this.retry.unref();
  }

  /**
   * An identity mutation was served through this replica: its cache is cleared at once and every
   * replica is told before the mutation is answered. If the notification cannot be sent, the other
   * replicas' cached answers still end within AUTH_CACHE_TTL_MS.
   */
  async announce(): Promise<void> {
    this.clear();
    try {
      await this.pool.query('SELECT pg_notify($1, $2)', [AUTH_CHANGES_CHANNEL, '']);
    } catch (err) {
      this.logger.warn(
        { err: (err as Error).message },
        'could not tell the other gateway replicas of an identity change: their cached credentials end within AUTH_CACHE_TTL_MS',
      );
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.listening = false;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
