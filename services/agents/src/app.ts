import { fileURLToPath } from 'node:url';
import { Keyring } from '@workauto/crypto';
import { JOBS_MIGRATIONS } from '@workauto/jobs';
import { createLogger, type Logger } from '@workauto/logger';
import { AgentsServiceService } from '@workauto/protos/workauto/agents/v1/agents.js';
import { startService, type RunningService, type ServiceConfig } from '@workauto/service';
import { agentsHandlers } from './handlers/index.js';
import { createProviders, type ProviderSettings } from './providers/index.js';
import { rewrapKeysWorker } from './worker/rewrap.js';

export interface AgentsConfig extends ServiceConfig {
  /** Keyring for provider keys at rest (`id:base64key,…`, first active); see @workauto/crypto. */
  encryptionKeys: string;
  /** Provider base URLs (as the official SDKs take them), timeouts and retries. */
  providers?: Partial<ProviderSettings>;
}

export type { RunningService };

export const DEFAULT_PROVIDER_SETTINGS: ProviderSettings = {
  openaiBaseUrl: 'https://api.openai.com/v1',
  anthropicBaseUrl: 'https://api.anthropic.com',
  probeTimeoutMs: 10_000,
  chatTimeoutMs: 60_000,
  chatMaxRetries: 2,
};

/** agents with the shared start-up (@workauto/service): the same steps for main.ts, make dev and tests. */
export function createAgentsService(config: AgentsConfig, logger: Logger = createLogger('agents')): Promise<RunningService> {
  const keyring = Keyring.fromEnv(config.encryptionKeys);
  const providers = createProviders({ ...DEFAULT_PROVIDER_SETTINGS, ...config.providers });
  return startService(
    {
      name: 'agents',
      errorDomain: 'agents.workauto',
      protoFile: 'workauto/agents/v1/agents.proto',
      grpcService: 'workauto.agents.v1.AgentsService',
      definition: AgentsServiceService,
      migrations: [JOBS_MIGRATIONS, fileURLToPath(new URL('../migrations', import.meta.url))],
      handlers: (pool) => agentsHandlers({ pool, keyring, providers }),
      workers: ({ pool }) => [rewrapKeysWorker(pool, keyring, logger)],
    },
    config,
    logger,
  );
}
