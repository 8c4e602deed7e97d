import { metrics } from '@opentelemetry/api';
import type pg from 'pg';
import type { Logger } from '@workauto/logger';
import { preparedStatement } from '@workauto/db';
import { backoffDelay } from '@workauto/retry';
import { TOPICS, type EventTransport, type TransportMessage } from './transport.js';

/** Looked up at each use, like consumer.ts's: the meter provider is registered when telemetry starts. */
const meter = () => metrics.getMeter('@workauto/events');
/** Alert when it grows for minutes: events wait in the outbox (Kafka away, or a relay stuck). */
const backlog = () =>
  meter().createGauge('workauto.outbox.backlog', {
    description: 'Events waiting in the outbox after the last relay attempt',
    unit: '{event}',
  });
const publishFailures = () =>
  meter().createCounter('workauto.outbox.publish_failures', {
    description: 'Relay attempts that could not publish to Kafka',
    unit: '{attempt}',
  });

export interface RelayOptions {
  pool: pg.Pool;
  transport: EventTransport;
  /** The service name: the relay's advisory lock and log lines are per service database. */
  source: string;
  logger: Logger;
  topics?: { audit: string; domain: string };
  batchSize?: number;
  /** Payload bytes per batch (default 512 KiB), below the broker's message.max.bytes (1 MB by default). */
  maxBatchBytes?: number;
  /** Polling fallback when no NOTIFY arrives (default 1 s). */
  pollMs?: number;
  /**
   * How long a drain waits after the commit that woke it (default 5 ms), so that the commits of the
   * next few milliseconds go out in the same publish: fewer drains, produce requests and consumer
   * batches under load, for a few ms of latency (Kafka's own producer lingers 5 ms by default).
   */
  lingerMs?: number;
  /** How long published rows stay in the outbox (for inspection) before they are deleted (default 24 h). */
  keepPublishedMs?: number;
}

interface OutboxRow {
  seq: string;
  id: string;
  tenant_id: string;
  event_type: string;
  resource_type: string;
  resource_id: string;
  payload: Buffer;
  headers: Record<string, string>;
}

/** Session lock of the active relay: decides which relay drains (the others stand by). */
const LOCK_KEY = 'workauto.outbox-relay';
/**
 * Transaction lock every drain takes first. The session lock alone is no fence: when the leader's
 * connection dies, a standby takes over while the old leader may still be draining through other
 * pool connections, and two drains at once publish out of seq order. This lock makes drains of
 * one database strictly one at a time, whoever believes it leads.
 */
const DRAIN_LOCK_KEY = 'workauto.outbox-relay.drain';

/*
 * A drain's statements, prepared once per connection: on the audit tail's path, and the claim's
 * plan (window functions over the batch) cost more than its execution (docs/benchmarks.md).
 */
/*
 * The lock statement also makes the drain's statements run their generic plans
 * (plan_cache_mode, for this transaction only): with a custom plan per call, PostgreSQL planned
 * MARK_PUBLISHED on every drain, since a plan for the batch's actual array of seqs looks cheaper
 * than one for an array of unknown length (docs/benchmarks.md, "The API mix").
 */
const TAKE_DRAIN_LOCK = preparedStatement<[string]>(
  'outbox_take_drain_lock',
  `SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked,
          set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode`,
);
const CLAIM_BATCH = preparedStatement<[number, number]>(
  'outbox_claim_batch',
  `SELECT seq, id, tenant_id, event_type, resource_type, resource_id, payload, headers, claimed
     FROM (SELECT o.seq, o.id, o.tenant_id, o.event_type, o.resource_type, o.resource_id, o.payload, o.headers,
                  sum(octet_length(o.payload)) OVER w AS running_bytes, row_number() OVER w AS n, count(*) OVER () AS claimed
             FROM outbox o
            WHERE o.seq IN (SELECT seq FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
           WINDOW w AS (ORDER BY o.seq)) batch
    WHERE n = 1 OR running_bytes <= $2
    ORDER BY seq`,
);
const MARK_PUBLISHED = preparedStatement<[(string | number)[]]>(
  'outbox_mark_published',
  'UPDATE outbox SET published_at = clock_timestamp() WHERE seq = ANY($1::bigint[])',
);

/**
 * Publishes committed outbox rows in seq (insert) order to the audit and domain-event topics, and
 * marks them published only after the transport acknowledged them. One relay per database is
 * active (a session advisory lock) and every drain is fenced by a transaction advisory lock, so
 * two drains never publish at once. Wakes on NOTIFY (then lingers lingerMs, so the commits right
 * after go in the same publish), polls as a fallback, and backs off while the broker is
 * unreachable — the rows wait in the outbox, nothing is lost.
 */
export class OutboxRelay {
  private client: pg.PoolClient | undefined;
  private running = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private failures = 0;
  /** Set when the leader connection broke: leadership is gone with its session. */
  private lost = false;
  /** True while this relay holds the lock (the active one). */
  active = false;

  constructor(private readonly opts: RelayOptions) {}

  /** What every service does at start: make sure the topics exist, then relay. */
  static async start(opts: RelayOptions): Promise<OutboxRelay> {
    const topics = opts.topics ?? TOPICS;
    await opts.transport.ensureTopics([topics.audit, topics.domain, TOPICS.deadLetter]);
    const relay = new OutboxRelay(opts);
    relay.start();
    return relay;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
  }

  /** Publishes everything pending now (used by tests and on shutdown paths). */
  async drainOnce(): Promise<number> {
    return (await this.drain()).published;
  }

  private async run(): Promise<void> {
    const { logger, pollMs = 1_000, lingerMs = 5 } = this.opts;
    while (this.running) {
      try {
        if (this.lost) await this.release();
        if (!this.client) await this.acquire();
        if (!this.active) {
          await this.sleep(pollMs);
          continue;
        }
        await this.prunePublished();
        // A NOTIFY that arrives from here on (even while this drain runs) makes the next sleep return at once.
        this.notified = false;
        const { more } = await this.drain();
        this.failures = 0;
        // Drained to the end: no second, empty drain (four round trips a change committed meanwhile
        // would wait behind); a commit since this drain began has set `notified`, so the sleep
        // returns at once for it.
        if (more) continue;
        backlog().record(0, { source: this.opts.source });
        await this.sleep(pollMs);
        await this.lingerAfterCommit(lingerMs);
      } catch (err) {
        this.failures++;
        const delay = backoffDelay({ firstMs: 500, maxMs: 30_000 }, this.failures);
        const pending = await this.pendingCount().catch(() => -1);
        publishFailures().add(1, { source: this.opts.source });
        if (pending >= 0) backlog().record(pending, { source: this.opts.source });
        // Say what to check: the database when the outbox itself cannot be read, else the transport
        // (Kafka, when there is one; the in-process transport of make dev has no address to check).
        const where = this.opts.transport.where;
        logger.warn(
          { err: (err as Error).message, pending, retry_in_ms: delay, source: this.opts.source },
          `events could not be published; they stay in the outbox and will be retried — check that ${
            pending < 0
              ? 'the database is reachable'
              : where
                ? `Kafka (${where}) is reachable`
                : 'the service is healthy'
          }`,
        );
        if (this.client && !(await this.alive())) await this.release();
        await this.sleep(delay, { backoff: true });
      }
    }
    await this.release();
  }

  private async acquire(): Promise<void> {
    const client = await this.opts.pool.connect();
    let locked: boolean;
    try {
      const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [
        LOCK_KEY,
      ]);
      locked = rows[0]?.locked === true;
    } catch (err) {
      client.release(true);
      throw err;
    }
    if (!locked) {
      client.release();
      this.active = false;
      return;
    }
    // A held connection that breaks (database restart, a killed backend) must not crash the
    // process, and its session lock is gone with it: stop counting as active at once (drains are
    // fenced by the drain lock anyway); the loop releases it and tries to lead again.
    const onError = (err: Error) => {
      this.lost = true;
      this.active = false;
      this.opts.logger.warn(
        { err: err.message, source: this.opts.source },
        'outbox relay lost its database connection; reconnecting',
      );
    };
    const onNotification = () => {
      this.notified = true;
      this.wake?.();
    };
    client.on('error', onError);
    client.on('notification', onNotification);
    // Listeners come off when a healthy connection goes back to the pool (a broken one keeps
    // them: it is destroyed, and late errors must still find a listener).
    this.detach = () => {
      client.off('error', onError);
      client.off('notification', onNotification);
    };
    this.client = client;
    this.active = true;
    await client.query('LISTEN outbox');
  }

  private detach: (() => void) | undefined;

  private async release(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.active = false;
    this.lost = false;
    if (!client) return;
    try {
      await client.query('UNLISTEN outbox');
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [LOCK_KEY]);
      this.detach?.();
      client.release();
    } catch {
      client.release(true); // a broken connection: its session (and lock) are gone anyway
    }
  }

  private async alive(): Promise<boolean> {
    try {
      await this.client?.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  /** When a commit ended the sleep, waits ms more whatever commits arrive; only stop() ends it early. */
  private lingerAfterCommit(ms: number): Promise<void> {
    if (!this.running || !this.notified || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        if (this.running) return;
        clearTimeout(t);
        resolve();
      };
    });
  }

  /** Set by NOTIFY: a commit happened since the last drain began. */
  private notified = false;

  /**
   * Waits ms, or less: stop() always ends the wait; a NOTIFY does too unless this is a backoff
   * after a failure (then commits arriving must not turn the backoff into a busy retry loop).
   */
  private sleep(ms: number, { backoff = false } = {}): Promise<void> {
    if (!this.running || (!backoff && this.notified)) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      const done = () => {
        clearTimeout(t);
        resolve();
      };
      this.wake = backoff
        ? () => {
            if (!this.running) done();
          }
        : done;
    });
  }

  private lastPrune = 0;

  /** Deletes rows published more than keepPublishedMs ago, at most every 10 minutes. */
  private async prunePublished(): Promise<void> {
    if (Date.now() - this.lastPrune < 10 * 60_000) return;
    this.lastPrune = Date.now();
    const keepMs = this.opts.keepPublishedMs ?? 24 * 3_600_000;
    await this.opts.pool.query(`DELETE FROM outbox WHERE published_at < now() - $1 * interval '1 millisecond'`, [
      keepMs,
    ]);
  }

  private async pendingCount(): Promise<number> {
    const { rows } = await this.opts.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL',
    );
    return rows[0]!.n;
  }

  /**
   * One batch: claim pending rows, publish them, mark them — in one transaction that first takes
   * the drain lock; when another drain holds it (another relay, e.g. during a takeover) this one
   * publishes nothing.
   */
  /** `more`: rows may be pending still (the batch was full or cut by size). */
  private async drain(): Promise<{ published: number; more: boolean }> {
    const { pool, transport, batchSize = 200, maxBatchBytes = 512 * 1024 } = this.opts;
    const topics = this.opts.topics ?? TOPICS;
    const tx = await pool.connect();
    try {
      await tx.query('BEGIN');
      const { rows: lock } = await tx.query<{ locked: boolean }>(TAKE_DRAIN_LOCK([DRAIN_LOCK_KEY]));
      if (!lock[0]?.locked) {
        await tx.query('COMMIT');
        return { published: 0, more: false };
      }
      // Kafka takes a partition's part of a publish as one record batch, refused whole when it
      // exceeds the broker's message.max.bytes (1 MB by default): a batch of large events would be
      // retried forever. Batches stop at maxBatchBytes (always at least one event). Claim, cut and
      // rows in one query: the drain is on the audit tail's path (docs/benchmarks.md).
      const { rows } = await tx.query<OutboxRow & { claimed: string }>(CLAIM_BATCH([batchSize, maxBatchBytes]));
      if (!rows.length) {
        await tx.query('COMMIT');
        return { published: 0, more: false };
      }
      const messages: TransportMessage[] = rows.flatMap((r) => {
        const headers = {
          ...r.headers,
          'event-id': r.id,
          'event-type': r.event_type,
          'tenant-id': r.tenant_id,
          source: this.opts.source,
        };
        const key = `${r.resource_type}:${r.resource_id}`;
        return [
          { topic: topics.audit, key, value: r.payload, headers },
          { topic: topics.domain, key, value: r.payload, headers },
        ];
      });
      await transport.publish(messages);
      // clock_timestamp(): the moment of the broker's ack (now() would be the drain's start), for the per-stage figures.
      await tx.query(MARK_PUBLISHED([rows.map((r) => r.seq)]));
      await tx.query('COMMIT');
      const claimed = Number(rows[0]!.claimed);
      return { published: rows.length, more: claimed >= batchSize || rows.length < claimed };
    } catch (err) {
      await tx.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      tx.release();
    }
  }
}
