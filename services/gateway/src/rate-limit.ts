/**
 * Requests per minute per credential (the token's hash) or, without one, per client address; and
 * failed authentications per client address, so rotating made-up tokens (each its own credential
 * key) cannot probe keys or load identity without limit. Both count through the RateCounter every
 * gateway replica shares (shared-counter.ts): the limits are per credential and per address, not per replica.
 */
import type { Request, RequestHandler, Response } from 'express';
import { rateLimit, ipKeyGenerator } from 'express-rate-limit';
import * as grpc from '@grpc/grpc-js';
import { metrics } from '@opentelemetry/api';
import { requestCredential } from './auth.js';
import { GatewayError, retryAfterSeconds } from './errors.js';
import { rateCounterStore, WINDOW_MS, type RateCounter } from './shared-counter.js';

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

function limited(send: Send, what: string, limitPerMinute: number) {
  return (req: Request, res: Response) => {
    rejections().add(1, { limit: what });
    const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
    const retryAfter = retryAfterSeconds(reset ? reset.getTime() - Date.now() : WINDOW_MS);
    send(
      res,
      new GatewayError(
        grpc.status.RESOURCE_EXHAUSTED,
        'RATE_LIMITED',
        `too many ${what} (limit ${limitPerMinute} per minute); retry after ${retryAfter} s`,
        undefined,
        { metadata: { limit_per_minute: String(limitPerMinute), retry_after_seconds: String(retryAfter) } },
      ),
    );
  };
}

export function rateLimiter(limitPerMinute: number, send: Send, counter: RateCounter): RequestHandler {
  return rateLimit({
    windowMs: WINDOW_MS,
    store: rateCounterStore(counter, 'request:'),
    limit: limitPerMinute,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    keyGenerator: (req) => {
      // The hash, never the token: the store must not become a list of live credentials.
      const credential = requestCredential(req);
      return credential ? `t:${credential.key}` : clientKey(req);
    },
    handler: limited(send, 'requests for this credential', limitPerMinute),
  });
}

/**
 * Counts the 401s a client address receives; past the limit, that address gets 429 for requests
 * whose credential is not known to be valid. A credential this replica authenticated within the
 * last KNOWN_VALID_MS is let through (and not counted), so a flood of made-up tokens from a shared
 * address (a NAT, an office) never locks out the real keys behind it.
 */
export function failedAuthLimiter(limitPerMinute: number, send: Send, counter: RateCounter): RequestHandler {
  const knownValid = new KnownValidCredentials();
  const limiter = rateLimit({
    windowMs: WINDOW_MS,
    store: rateCounterStore(counter, 'failed-auth:'),
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
