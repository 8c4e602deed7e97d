import { readFileSync } from 'node:fs';
import { z } from 'zod';

export { z };

let version: string | undefined;

/**
 * The product's version: the repository's package.json's (the image keeps it at /app), which the
 * chart's appVersion and @workauto/client's version equal. Outbound requests name it in User-Agent.
 */
export function productVersion(): string {
  version ??= (
    JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }
  ).version;
  return version;
}

/** Thrown at start-up when the environment is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Validates environment variables against a schema whose keys are the variable names, and fails
 * fast with one message that names each bad variable and says what it should be.
 */
export function loadConfig<S extends z.ZodRawShape>(
  shape: S,
  env: Record<string, string | undefined> = process.env,
): z.infer<z.ZodObject<S>> {
  const result = z.object(shape).safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => {
      const name = issue.path.join('.');
      const value = env[name];
      const shown =
        value === undefined ? 'unset' : `got ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
      return `  ${name}: ${issue.message} (${shown})`;
    });
    throw new ConfigError(
      `invalid configuration; set these environment variables and start again:\n${lines.join('\n')}`,
    );
  }
  return result.data;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `500ms`, `30s`, `5m`, `2h`, `5d` (a whole number and a unit) in milliseconds; undefined if it is not one. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  return m ? Number(m[1]) * DURATION_UNITS[m[2]!]! : undefined;
}

/** An empty variable counts as unset (`FOO=` in a shell or a chart's empty value): its default applies. */
const emptyIsUnset = (v: unknown) => (v === '' ? undefined : v);

/** Common variable shapes, so every service spells them the same way. */
export const vars = {
  /** A duration such as `30s`, `5m`, `24h`, `5d` (also `500ms`), in milliseconds. */
  duration: (fallback: string) =>
    z
      .string()
      .default(fallback)
      .transform((text, ctx) => {
        const ms = parseDuration(text);
        if (ms === undefined) {
          ctx.addIssue({
            code: 'custom',
            message: 'expected a duration: a whole number and a unit (ms, s, m, h, d), e.g. 30s, 5m, 24h',
          });
          return z.NEVER;
        }
        return ms;
      }),
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  /** An address to listen on; empty is unset (`::`: every address, IPv6 and IPv4). */
  host: (fallback: string) => z.preprocess(emptyIsUnset, z.string().default(fallback)),
  /** A port to listen on only when set (e.g. METRICS_PORT); empty is unset. */
  optionalPort: () =>
    z.preprocess(
      emptyIsUnset,
      z.coerce
        .number({ error: 'must be a port number (0–65535), or unset' })
        .int({ error: 'must be a port number (0–65535), or unset' })
        .min(0, { error: 'must be a port number (0–65535), or unset' })
        .max(65535, { error: 'must be a port number (0–65535), or unset' })
        .optional(),
    ),
  /**
   * A whole number from min to max (no max: unbounded), `fallback` when unset or empty; a bad value
   * is named with what it should be (`what`, e.g. "a whole number of connections from 1 to 1000")
   * and how to get the default.
   */
  integer: (fallback: number, range: { min: number; max?: number; what: string }) => {
    const error = `must be ${range.what}; unset it for ${fallback}`;
    const n = z.coerce.number({ error }).int({ error }).min(range.min, { error });
    return z.preprocess(emptyIsUnset, (range.max === undefined ? n : n.max(range.max, { error })).default(fallback));
  },
  url: () => z.url(),
  logLevel: () => z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  milliseconds: (fallback: number) => z.coerce.number().int().positive().default(fallback),
  /** host:port of a gRPC service. */
  address: () => z.string().regex(/^[^\s:]+:\d+$/, 'expected host:port'),
  /** The private JWK (JSON, with a kid) that signs caller identity; required where it is the only way to call services. */
  callerSigningKey: () =>
    z
      .string({
        error:
          'is required: the private JWK (JSON with a kid) that signs the caller identity of each downstream call; see docs/operations.md',
      })
      .min(1),
};

/**
 * Caller identity and the gRPC surface, the same in every service's main: a service accepts only
 * calls whose caller token is signed by a key in CALLER_VERIFY_KEYS, so it refuses to start without them.
 */
export const grpcServiceVars = {
  CALLER_VERIFY_KEYS: z
    .string({
      error:
        'is required: the JWKS ({"keys": [public JWKs with kids]}) of the gateway\'s (and any calling service\'s) CALLER_SIGNING_KEY; see docs/operations.md',
    })
    .min(1),
  /** Only for a service that calls other services on a caller's behalf. */
  CALLER_SIGNING_KEY: z.string().min(1).optional(),
  GRPC_REFLECTION: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
};

/**
 * Browser round trips through the gateway (OAuth consents: identity's integration keys, apps'
 * servers), the same in every service that runs one: the public gateway URL the callbacks live
 * under, and the origins a flow may send the browser back to.
 */
export const oauthRedirectVars = {
  OAUTH_REDIRECT_BASE_URL: vars.url().default('http://127.0.0.1:8080'),
  OAUTH_ALLOWED_RETURN_ORIGINS: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean),
    ),
};

/**
 * The event transport's variables, the same in every service's main. Kafka is required there: a
 * service in a process of its own has no in-process consumers, so its events would go nowhere
 * (make dev, which runs everything in one process, uses the in-process transport instead).
 */
export const kafkaVars = {
  /** host:port[,…] */
  KAFKA_BROKERS: z
    .string({
      error:
        'is required: host:port[,…] of the Kafka brokers (make dev runs without Kafka, a service on its own cannot)',
    })
    .regex(/^[^\s:,]+:\d+(,[^\s:,]+:\d+)*$/, 'expected host:port[,host:port…]'),
  /** Partitions of the topics a service creates at start-up. */
  KAFKA_TOPIC_PARTITIONS: z.coerce.number().int().min(1).max(1000).default(3),
  /** Replication factor of those topics: 1 fits a single broker; use 3 on a production cluster. */
  KAFKA_TOPIC_REPLICATION_FACTOR: z.coerce.number().int().min(1).max(10).default(1),
  /** Retention of those topics (default 7 days). */
  KAFKA_TOPIC_RETENTION_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(7 * 24 * 3_600_000),
  /** false: topics are created by an operator (Strimzi KafkaTopic, a script); a service then only checks they exist. */
  KAFKA_CREATE_TOPICS: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /** TLS to the brokers; the server certificate is checked against KAFKA_TLS_CA_FILE, or the system's CAs. */
  KAFKA_TLS: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  /** PEM file of the CA(s) that signed the brokers' certificates (a mounted Secret). */
  KAFKA_TLS_CA_FILE: z.string().min(1).optional(),
  /** Client certificate and key (PEM files) for brokers that require one (mTLS, e.g. Strimzi's user.crt/user.key). */
  KAFKA_TLS_CERT_FILE: z.string().min(1).optional(),
  KAFKA_TLS_KEY_FILE: z.string().min(1).optional(),
  /** SASL mechanism; unset means no SASL. */
  KAFKA_SASL_MECHANISM: z
    .enum(['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer'], {
      error: 'must be plain, scram-sha-256, scram-sha-512 or oauthbearer',
    })
    .optional(),
  KAFKA_SASL_USERNAME: z.string().min(1).optional(),
  KAFKA_SASL_PASSWORD: z.string().min(1).optional(),
  /** OAUTHBEARER: a file holding the current access token (kept fresh by whoever writes it; read again at each authentication). */
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: z.string().min(1).optional(),
};
