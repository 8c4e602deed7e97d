import { Writable } from 'node:stream';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type Logger, type LoggerOptions } from 'pino';
import { loadConfig, vars } from '@workauto/config';

export type { Logger };

/**
 * Field names whose values are secrets. Censored at the top level and up to three levels down
 * (through objects, arrays and errors), so a secret that reaches a log call is censored, not written.
 */
const SECRET_KEYS = new Set([
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
]);
/**
 * `code` is a secret only where it is an invitation code or an OAuth authorization code: in a
 * request's body, query or params, or on an invitation. Elsewhere it is a SQLSTATE (`err.code`),
 * a gRPC status or an errno, which the logs need to be of any use.
 */
const SECRET_CODE_HOLDERS = new Set(['body', 'query', 'params', 'request', 'invitation']);
const CENSOR = '[redacted]';
/** The deepest level whose secrets are censored: the logged object's own keys are level 0. */
const MAX_DEPTH = 3;

/**
 * `value` with its secrets censored: itself when it holds none (the usual line: one walk over a few
 * keys), else a copy, so the caller's object is never changed. Hand-written rather than pino's
 * `redact`: with paths that start with a wildcard, pino 10's redaction parses and walks every
 * path for every value of every line, ~50 µs per line (docs/benchmarks.md, "Changes of issue 36").
 */
function censored<T>(value: T, depth = 0, holdsCode = false): T {
  if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value) || value instanceof Date) return value;
  const source = value as Record<string, unknown>;
  const list = Array.isArray(source);
  let copy: Record<string, unknown> | undefined;
  for (const key of keysOf(source)) {
    const item = source[key];
    const secret = !list && (SECRET_KEYS.has(key) || (holdsCode && key === 'code'));
    const next = secret
      ? CENSOR
      : depth < MAX_DEPTH
        ? censored(item, depth + 1, !list && SECRET_CODE_HOLDERS.has(key))
        : item;
    if (next === item) continue;
    copy ??= copyOf(source);
    copy[key] = next;
  }
  return (copy ?? value) as T;
}

/**
 * The keys whose values a line writes: an object's own enumerable ones; an error's as pino's err
 * serializer reads them (enumerable, own and inherited, and an AggregateError's `errors`).
 */
function keysOf(source: object): string[] {
  if (!(source instanceof Error)) return Object.keys(source);
  const keys: string[] = [];
  for (const key in source) keys.push(key);
  if (Array.isArray((source as { errors?: unknown }).errors) && !keys.includes('errors')) keys.push('errors');
  return keys;
}

/** A shallow copy that stays what it was (an array, an error of its class, with its message and stack). */
function copyOf(source: Record<string, unknown>): Record<string, unknown> {
  if (Array.isArray(source)) return [...(source as unknown[])] as unknown as Record<string, unknown>;
  const copy = Object.create(
    Object.getPrototypeOf(source) as object,
    Object.getOwnPropertyDescriptors(source),
  ) as Record<string, unknown>;
  // An error's stack is read through the original (its accessor reads the error it was captured on).
  if (source instanceof Error)
    Object.defineProperty(copy, 'stack', { value: source.stack, writable: true, configurable: true });
  return copy;
}

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

/**
 * Exits with `code` once every line logged so far is written. process.exit() drops what the sink
 * still holds, and it holds a line logged in the same tick as an earlier one until that one's write
 * completes: a start's fatal line right after a warning was lost so, and the process exited 1
 * saying nothing. Waits at most 2 s for an output that does not drain.
 */
export function exitAfterLogs(code: number): Promise<never> {
  process.exitCode = code;
  return new Promise<never>(() => {
    const exit = () => process.exit(code);
    setTimeout(exit, 2_000);
    // Written in order: its callback runs once the lines before it are out.
    sink.write('', exit);
  });
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
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label) => ({ level: label }),
      // Every line's fields, and the bindings, with their secrets censored.
      log: (fields) => censored(fields),
      bindings: (bindings) => censored(bindings),
    },
    // Every line written inside a traced call carries its trace and span, so logs and traces join.
    mixin: () => {
      const span = trace.getActiveSpan()?.spanContext();
      return span && isSpanContextValid(span)
        ? { trace_id: span.traceId, span_id: span.spanId, trace_flags: `0${span.traceFlags.toString(16)}` }
        : {};
    },
  };
  const logger = pino(options, sink);
  // A child's bindings skip the bindings formatter: censored here (children inherit this child()).
  const child = logger.child;
  logger.child = function (this: Logger, bindings, childOptions) {
    return child.call(this, censored(bindings), childOptions);
  } as typeof child;
  return logger;
}
