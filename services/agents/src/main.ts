import { vars, z } from '@workauto/config';
import { runService } from '@workauto/service/main';

await runService({
  name: 'agents',
  grpcPort: 50057,
  env: {
    ENCRYPTION_KEYS: z.string().min(1, 'must be id:base64key[,…] (32-byte keys)'),
    // As the official SDKs take them: OpenAI's includes /v1, Anthropic's does not.
    OPENAI_BASE_URL: vars.url().default('https://api.openai.com/v1'),
    ANTHROPIC_BASE_URL: vars.url().default('https://api.anthropic.com'),
    AGENT_PROBE_TIMEOUT_MS: vars.milliseconds(10_000),
    AGENT_PROVIDER_TIMEOUT_MS: vars.milliseconds(60_000),
    AGENT_PROVIDER_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  },
  // Imported here, after telemetry started, so its instrumentations see grpc and pg.
  start: async (config, env, logger) =>
    (await import('./app.js')).createAgentsService(
      {
        ...config,
        encryptionKeys: env.ENCRYPTION_KEYS,
        providers: {
          openaiBaseUrl: env.OPENAI_BASE_URL, anthropicBaseUrl: env.ANTHROPIC_BASE_URL,
          probeTimeoutMs: env.AGENT_PROBE_TIMEOUT_MS, chatTimeoutMs: env.AGENT_PROVIDER_TIMEOUT_MS, chatMaxRetries: env.AGENT_PROVIDER_MAX_RETRIES,
        },
      },
      logger,
    ),
});
