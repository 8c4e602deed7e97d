import { Writable } from 'node:stream';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type Logger, type LoggerOptions } from 'pino';
import { loadConfig, vars } from '@workauto/config';

export type { Logger };

/**
 * Field names whose values are secrets. Redacted at any depth pino can address (top level and
 * up to three levels down), so a secret that reaches a log call is censored, not written.
 */
const SECRET_KEYS = [
  'authorization',
  'api_key',
  'apiKey',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'secret',
  'client_secret',
  'signing_secret',
  'password',
  'credential',
  'code_verifier',
  'cookie',
  'platform_admin_token',
  'encryption_keys',
];
/**
 * `code` is a secret only where it is an invitation code or an OAuth authorization code: in a
 * request's body, query or params, or on an invitation. Elsewhere it is a SQLSTATE (`err.code`),
 * a gRPC status or an errno, which the logs need to be of any use.
 */
const SECRET_CODE_HOLDERS = ['body', 'query', 'params', 'request', 'invitation'];
const REDACT_PATHS = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`, `req.headers.${k}`]),
  ...SECRET_CODE_HOLDERS.flatMap((h) => [`${h}.code`, `*.${h}.code`, `*.*.${h}.code`]),
];

/**
 * Where every logger writes. One indirection so a test can capture the lines of the whole
 * process (services included) and assert that no secret reached them.
 */
class Sink extends Writable {
  target: NodeJS.WritableStream = process.stdout;
  tap: ((line: string) => void) | undefined;
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.tap?.(chunk.toString('utf8'));
    this.target.write(chunk, done);
  }
}
const sink = new Sink();

/** Calls `tap` with every log line written from now on, until the returned function is called. */
export function tapLogs(tap: (line: string) => void): () => void {
  sink.tap = tap;
  return () => {
    sink.tap = undefined;
  };
}

/** Sends log lines elsewhere (tests send them to a file to keep the runner's output readable). */
export function setLogTarget(target: NodeJS.WritableStream): void {
  sink.target = target;
}

/** The level LOG_LEVEL names (default info), read like every other variable (a bad one is named). */
function levelFromEnv(): string {
  return loadConfig({ LOG_LEVEL: vars.logLevel() }).LOG_LEVEL;
}

/** A logger at `level`; a process passes its config's LOG_LEVEL, and without one LOG_LEVEL is read. */
export function createLogger(name: string, level: string = levelFromEnv()): Logger {
  const options: LoggerOptions = {
    name,
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Every line written inside a traced call carries its trace and span, so logs and traces join.
    mixin: () => {
      const span = trace.getActiveSpan()?.spanContext();
      return span && isSpanContextValid(span)
        ? { trace_id: span.traceId, span_id: span.spanId, trace_flags: `0${span.traceFlags.toString(16)}` }
        : {};
    },
  };
  return pino(options, sink);
}
