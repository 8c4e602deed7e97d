/**
 * Requests per minute per credential (the token's hash) or, without one, per client address; and
 * failed authentications per client address, so rotating made-up tokens (each its own credential
 * key) cannot probe keys or load identity without limit. In memory: the limits are per replica.
 */
import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { rateLimit, ipKeyGenerator } from 'express-rate-limit';
import * as grpc from '@grpc/grpc-js';
import { metrics } from '@opentelemetry/api';
import { requestCredential } from './auth.js';
import { GatewayError } from './errors.js';

const WINDOW_MS = 60_000;

/** res.locals flag the transcoding handler sets once the request's credential authenticated. */
export const AUTHENTICATED = 'authenticated';

type Send = (res: Response, err: unknown) => void;

const clientKey = (req: Request) => `ip:${ipKeyGenerator(req.ip ?? '')}`;

/** Looked up at each use: the meter provider is registered when telemetry starts. */
const rejections = () =>
  metrics.getMeter('@workauto/gateway').createCounter('workauto.gateway.rate_limited', {
    description: 'Requests answered 429 by a rate limit',
    unit: '{request}',
  });

export function limited(send: Send, what: string, limitPerMinute: number) {
  return (req: Request, res: Response) => {
    rejections().add(1, { limit: what });
    const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
    const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + WINDOW_MS) - Date.now()) / 1000));
    send(
      res,
      new GatewayError(
        grpc.status.RESOURCE_EXHAUSTED,
        'RATE_LIMITED',
        `too many ${what} (limit ${limitPerMinute} per minute); retry after ${retryAfter} s`,
        undefined,
        {
          headers: { 'Retry-After': String(retryAfter) },
          metadata: { limit_per_minute: String(limitPerMinute), retry_after_seconds: String(retryAfter) },
        },
      ),
    );
  };
}

/**
 * Per credential (or client address) and minute, with the IETF draft-8 RateLimit and
 * RateLimit-Policy headers on every response, written as express-rate-limit writes them
 * (rate-limit.test.ts holds the two side by side). Counted here rather than by that middleware:
 * its per-request promises, validations and SHA-256 of the key (the policy's partition key, here
 * once per window entry) are a measurable share of a request's CPU (docs/benchmarks.md).
 */
export function rateLimiter(limitPerMinute: number, send: Send): RequestHandler {
  const windows = new MinuteWindows();
  const onLimit = limited(send, 'requests for this credential', limitPerMinute);
  // express-rate-limit's default identifier for a one-minute window.
  const name = `"${limitPerMinute}-in-${WINDOW_MS / 60_000}min"`;
  const policy = `${name}; q=${limitPerMinute}; w=${WINDOW_MS / 1000}; pk=:`;
  return (req, res, next) => {
    // The hash, never the token: the store must not become a list of live credentials.
    const credential = requestCredential(req);
    const key = credential ? `t:${credential.key}` : clientKey(req);
    const now = Date.now();
    const window = windows.hit(key, now);
    const resetTime = new Date(window.resetAt);
    const remaining = Math.max(limitPerMinute - window.hits, 0);
    (req as Request & { rateLimit?: RateLimitInfo }).rateLimit = {
      limit: limitPerMinute,
      used: window.hits,
      remaining,
      resetTime,
      key,
    };
    if (!res.headersSent) {
      const resetSeconds = Math.max(0, Math.ceil((window.resetAt - now) / 1000));
      res.append('RateLimit', `${name}; r=${remaining}; t=${resetSeconds}`);
      res.append('RateLimit-Policy', `${policy}${(window.partitionKey ??= partitionKey(key))}:`);
    }
    if (window.hits > limitPerMinute) return onLimit(req, res);
    next();
  };
}

interface RateLimitInfo {
  limit: number;
  used: number;
  remaining: number;
  resetTime: Date;
  key: string;
}

/** The draft-8 policy's pk: express-rate-limit's, the first 12 hex digits of the key's SHA-256, base64. */
function partitionKey(key: string): string {
  return Buffer.from(createHash('sha256').update(key).digest('hex').slice(0, 12)).toString('base64');
}

/**
 * Hits per key in a window of a minute from the key's first hit, as express-rate-limit's MemoryStore
 * counts them: a key unused for one to two minutes is forgotten (the maps rotate every minute).
 */
class MinuteWindows {
  private previous = new Map<string, Window>();
  private current = new Map<string, Window>();

  constructor() {
    setInterval(() => {
      this.previous = this.current;
      this.current = new Map();
    }, WINDOW_MS).unref();
  }

  hit(key: string, now: number): Window {
    let window = this.current.get(key);
    if (!window) {
      window = this.previous.get(key);
      if (window) this.previous.delete(key);
      else window = { hits: 0, resetAt: now + WINDOW_MS };
      this.current.set(key, window);
    }
    if (window.resetAt <= now) {
      window.hits = 0;
      window.resetAt = now + WINDOW_MS;
    }
    window.hits++;
    return window;
  }
}

interface Window {
  hits: number;
  /** When the window ends (ms). */
  resetAt: number;
  partitionKey?: string;
}

/**
 * Counts the 401s a client address receives; past the limit, that address gets 429 for requests
 * whose credential is not known to be valid. A credential this replica authenticated within the
 * last KNOWN_VALID_MS is let through (and not counted), so a flood of made-up tokens from a shared
 * address (a NAT, an office) never locks out the real keys behind it.
 */
export function failedAuthLimiter(limitPerMinute: number, send: Send): RequestHandler {
  const knownValid = new KnownValidCredentials();
  const limiter = rateLimit({
    windowMs: WINDOW_MS,
    limit: limitPerMinute,
    standardHeaders: false,
    legacyHeaders: false,
    keyGenerator: clientKey,
    skip: (req) => knownValid.has(credentialOf(req)),
    skipSuccessfulRequests: true,
    requestWasSuccessful: (_req, res) => res.statusCode !== 401,
    handler: limited(send, 'failed authentications from this address', limitPerMinute),
  });
  return (req, res, next) => {
    const credential = credentialOf(req);
    if (credential) {
      res.on('finish', () => {
        if (res.locals[AUTHENTICATED] === true) knownValid.add(credential);
        else if (res.statusCode === 401) knownValid.delete(credential);
      });
      // What the limiter's skip would decide, without its per-request promises and listeners.
      if (knownValid.has(credential)) return next();
    }
    return limiter(req, res, next);
  };
}

function credentialOf(req: Request): string | undefined {
  return requestCredential(req)?.key;
}

/** How long a credential that authenticated stays exempt from the failed-auth limit. */
const KNOWN_VALID_MS = 10 * 60_000;
const KNOWN_VALID_MAX = 100_000;

/** Hashes of credentials that recently authenticated (never the tokens), oldest evicted first. */
class KnownValidCredentials {
  private readonly seen = new Map<string, number>();

  add(credential: string): void {
    this.seen.delete(credential);
    this.seen.set(credential, Date.now() + KNOWN_VALID_MS);
    if (this.seen.size > KNOWN_VALID_MAX) this.seen.delete(this.seen.keys().next().value!);
  }

  delete(credential: string): void {
    this.seen.delete(credential);
  }

  has(credential: string | undefined): boolean {
    if (!credential) return false;
    const until = this.seen.get(credential);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.seen.delete(credential);
    return false;
  }
}
