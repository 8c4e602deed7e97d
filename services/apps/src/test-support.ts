/** The apps service on a fresh database for its own tests, called over real gRPC. */
import pg from 'pg';
import { Keyring } from '@workauto/crypto';
import { EgressPolicy, type EgressPolicyOptions } from '@workauto/egress';
import { createLogger } from '@workauto/logger';
import { AppsServiceService as S } from '@workauto/protos/workauto/apps/v1/apps.js';
import { failure, testCallerKeys, testDatabase, TestClient } from '@workauto/testing';
import { createAppsService, type AppsConfig, type RunningService } from './app.js';

export { S, failure };

export interface StartOptions {
  databaseUrl?: string;
  egress?: EgressPolicyOptions;
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
  toolCallTimeoutMs?: number;
  toolResultMaxBytes?: number;
  encryptionKeys?: string;
  logLevel?: string;
  /** The probe schedule's and OAuth's clock (a ManualClock of @workauto/testing); the system's by default. */
  clock?: AppsConfig['clock'];
  /** Where OAuth consents come back and may end. */
  oauth?: AppsConfig['oauth'];
}

export async function startApps(options: StartOptions = {}) {
  const databaseUrl = options.databaseUrl ?? (await testDatabase('apps'));
  const encryptionKeys = options.encryptionKeys ?? Keyring.generateSpec();
  const egress = new EgressPolicy(options.egress ?? { allowPrivate: true });
  const config: AppsConfig = {
    databaseUrl,
    host: '127.0.0.1',
    port: 0,
    callerVerifyKeys: testCallerKeys.verifyKeys,
    encryptionKeys,
    egress,
    // Hour-long by default: the tests see only the probe a create or a URL change starts.
    probeIntervalMs: options.probeIntervalMs ?? 3_600_000,
    // Room for a loaded machine (beside a second `make test`, a probe of a healthy server took over
    // 1.5 s and the app came out unreachable); tests of a hanging server wait this long for it.
    probeTimeoutMs: options.probeTimeoutMs ?? 10_000,
    toolCallTimeoutMs: options.toolCallTimeoutMs ?? 10_000,
    ...(options.toolResultMaxBytes ? { toolResultMaxBytes: options.toolResultMaxBytes } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.oauth ? { oauth: options.oauth } : {}),
  };
  const service: RunningService = await createAppsService(config, createLogger('apps', options.logLevel ?? 'silent'));
  const client = new TestClient('apps', `127.0.0.1:${service.port}`, { volumeThreshold: 100_000, deadlineMs: 30_000 });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    encryptionKeys,
    client,
    db,
    /** Event types of the tenant's outbox, in order. */
    async events(tenantId: string): Promise<string[]> {
      const { rows } = await db.query<{ event_type: string }>(
        'SELECT event_type FROM outbox WHERE tenant_id = $1 ORDER BY seq',
        [tenantId],
      );
      return rows.map((r) => r.event_type);
    },
    /** Every outbox payload of the tenant, as text (to look for secrets in). */
    async outboxText(tenantId: string): Promise<string> {
      const { rows } = await db.query<{ payload: Buffer }>(
        'SELECT payload FROM outbox WHERE tenant_id = $1 ORDER BY seq',
        [tenantId],
      );
      return rows.map((r) => r.payload.toString('latin1')).join('\n');
    },
    async stop() {
      client.close();
      await db.end();
      await service.stop();
      await egress.close();
    },
  };
}

export type Apps = Awaited<ReturnType<typeof startApps>>;

export { newTenant as tenant, badFields } from '@workauto/testing';
