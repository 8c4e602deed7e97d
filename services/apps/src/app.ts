import { fileURLToPath } from 'node:url';
import { Keyring } from '@workauto/crypto';
import { EgressPolicy } from '@workauto/egress';
import { JOBS_MIGRATIONS, systemClock, type Clock } from '@workauto/jobs';
import { createLogger, type Logger } from '@workauto/logger';
import { AppsServiceService } from '@workauto/protos/workauto/apps/v1/apps.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { AppCredentials } from './credentials.js';
import { appsHandlers } from './handlers/index.js';
import { AppOAuth, type OAuthRedirects } from './oauth/connect.js';
import { AppTokens } from './oauth/tokens.js';
import { Prober } from './probes.js';

export interface AppsConfig extends ServiceConfig {
  /** ENCRYPTION_KEYS: the keyring the apps' secrets are encrypted with. */
  encryptionKeys: string;
  /** The egress policy every request to an MCP server goes through (EgressPolicy.fromEnv in main). */
  egress: EgressPolicy;
  /** APPS_PROBE_INTERVAL (default 5 min). */
  probeIntervalMs?: number;
  /** One probe's timeout, manual and scheduled (docs/apps.md "Probing": 10 s; shorter in tests). */
  probeTimeoutMs?: number;
  /** APPS_TOOL_CALL_TIMEOUT_MS (default 60 s). */
  toolCallTimeoutMs?: number;
  /** APPS_TOOL_RESULT_MAX_BYTES (default 1 MiB): the most bytes of a tool call's answer read. */
  toolResultMaxBytes?: number;
  /** Probes one replica runs at once (default 8). */
  probeConcurrency?: number;
  /**
   * The clock the probe schedule, OAuth states (10 minutes) and access tokens' expiry are read by
   * (tests move one by hand); the system's by default.
   */
  clock?: Clock;
  /** OAUTH_REDIRECT_BASE_URL and OAUTH_ALLOWED_RETURN_ORIGINS (default: http://127.0.0.1:8080, none). */
  oauth?: OAuthRedirects;
  /** One OAuth step's time: an authorize's discovery and registration, a code exchange, a refresh (10 s). */
  oauthTimeoutMs?: number;
}
export type { RunningService };

const PROBE_TIMEOUT_MS = 10_000;
const TOOL_CALL_TIMEOUT_MS = 60_000;
const PROBE_INTERVAL_MS = 5 * 60_000;
const TOOL_RESULT_MAX_BYTES = 1024 * 1024;
const OAUTH_TIMEOUT_MS = 10_000;

/** apps with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export function createAppsService(config: AppsConfig, logger: Logger = createLogger('apps')): Promise<RunningService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const clock = config.clock ?? systemClock;
  const redirects = config.oauth ?? { redirectBaseUrl: 'http://127.0.0.1:8080', allowedReturnOrigins: [] };
  const oauthTimeoutMs = config.oauthTimeoutMs ?? OAUTH_TIMEOUT_MS;
  let parts: { prober: Prober; credentials: AppCredentials; oauth: AppOAuth } | undefined;
  const partsOf = (pool: ConstructorParameters<typeof Prober>[0]['pool']) => {
    if (parts) return parts;
    const tokens = new AppTokens({ pool, keyring, egress: config.egress, clock, timeoutMs: oauthTimeoutMs });
    const credentials = new AppCredentials(keyring, tokens);
    const prober = new Prober({
      pool,
      credentials,
      egress: config.egress,
      logger,
      intervalMs: config.probeIntervalMs ?? PROBE_INTERVAL_MS,
      timeoutMs: config.probeTimeoutMs ?? PROBE_TIMEOUT_MS,
      ...(config.probeConcurrency ? { concurrency: config.probeConcurrency } : {}),
      ...(config.clock ? { clock: config.clock } : {}),
    });
    const oauth = new AppOAuth({
      pool,
      keyring,
      egress: config.egress,
      clock,
      redirects,
      timeoutMs: oauthTimeoutMs,
      wake: () => prober.wake(),
    });
    return (parts = { prober, credentials, oauth });
  };
  return startService(
    {
      name: 'apps',
      errorDomain: 'apps.workauto',
      protoFile: 'workauto/apps/v1/apps.proto',
      grpcService: 'workauto.apps.v1.AppsService',
      definition: AppsServiceService,
      // The jobs table: one job per scheduled probe.
      migrations: [JOBS_MIGRATIONS, fileURLToPath(new URL('../migrations', import.meta.url))],
      handlers: (pool) =>
        appsHandlers({
          pool,
          keyring,
          egress: config.egress,
          ...partsOf(pool),
          redirects,
          logger,
          toolCallTimeoutMs: config.toolCallTimeoutMs ?? TOOL_CALL_TIMEOUT_MS,
          toolResultMaxBytes: config.toolResultMaxBytes ?? TOOL_RESULT_MAX_BYTES,
        }),
      workers: ({ pool }) => partsOf(pool).prober.workers(),
    },
    config,
    logger,
  );
}
