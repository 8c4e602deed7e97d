/**
 * Requests per minute per credential (the token's hash) or, without one, per client address; and
 * failed authentications per client address, so rotating made-up tokens (each its own credential
 * key) cannot probe keys or load identity without limit. Both count through the RateCounter every
 * gateway replica shares (shared-counter.ts): the limits are per credential and per address, not per replica.
 */
import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator } from 'express-rate-limit';
import * as grpc from '@grpc/grpc-js';
import { metrics } from '@opentelemetry/api';
import { requestCredential } from './auth.js';
import { GatewayError, retryAfterSeconds } from './errors.js';
import { WINDOW_MS, type RateCounter, type RateDecision } from './shared-counter.js';

/** res.locals flag the transcoding handler sets once the request's credential authenticated. */
export const AUTHENTICATED = 'authenticated';

type Send = (res: Response, err: unknown) => void;

/** The client address as a limit's key; an IPv6 client is counted by its /56 (express-rate-limit's ipKeyGenerator). */
const clientKey = (req: Request) => `ip:${ipKeyGenerator(req.ip ?? '')}`;

/** Looked up at each use: the meter provider is registered when telemetry starts. */
const rejections = () =>
  metrics.getMeter('@workauto/gateway').createCounter('workauto.gateway.rate_limited', {
    description: 'Requests answered 429 by a rate limit',
    unit: '{request}',
  });

function limited(send: Send, what: string, limitPerMinute: number) {
  return (res: Response, resetTime: Date) => {
    rejections().add(1, { limit: what });
    const retryAfter = retryAfterSeconds(resetTime.getTime() - Date.now());
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

/**
 * What the IETF RateLimit header fields (draft 8, as express-rate-limit wrote them) say of a
 * credential's limit: `RateLimit: "600-in-1min"; r=598; t=41` and `RateLimit-Policy: "600-in-1min";
 * q=600; w=60; pk=:<partition key>:`, the partition key a short hash of the limit's key (its
 * SHA-256 hex, 12 characters, base64), kept per key rather than hashed per request.
 */
class RateLimitHeaders {
  private readonly name: string;
  private readonly partitionKeys = new Map<string, string>();

  constructor(private readonly limit: number) {
    this.name = `"${limit}-in-${WINDOW_MS / 60_000}min"`;
  }

  set(res: Response, key: string, d: RateDecision): void {
    if (res.headersSent) return;
    const reset = Math.max(0, Math.ceil((d.resetTime.getTime() - Date.now()) / 1000));
    res.setHeader('RateLimit', `${this.name}; r=${Math.max(this.limit - d.used, 0)}; t=${reset}`);
    res.setHeader(
      'RateLimit-Policy',
      `${this.name}; q=${this.limit}; w=${WINDOW_MS / 1000}; pk=:${this.partitionKey(key)}:`,
    );
  }

  private partitionKey(key: string): string {
    let pk = this.partitionKeys.get(key);
    if (pk === undefined) {
      const hex = createHash('sha256').update(key).digest('hex').slice(0, 12);
      pk = Buffer.from(hex).toString('base64');
      if (this.partitionKeys.size >= PARTITION_KEYS_MAX)
        this.partitionKeys.delete(this.partitionKeys.keys().next().value!);
      this.partitionKeys.set(key, pk);
    }
    return pk;
  }
}

const PARTITION_KEYS_MAX = 10_000;

/**
 * One take of the credential's (or the address's) limit per request, through the counter every
 * replica shares; the RateLimit headers on every answer, a 429 past the limit. Hand-written rather
 * than express-rate-limit's middleware, whose per-request work (its awaits, validations, debug
 * calls, and a SHA-256 of the key for the headers) cost more than the count itself
 * (docs/benchmarks.md, "Changes of issue 36"). A counter that fails (it does not: it counts alone
 * instead) is the request's error.
 */
export function rateLimiter(limitPerMinute: number, send: Send, counter: RateCounter): RequestHandler {
  const headers = new RateLimitHeaders(limitPerMinute);
  const refuse = limited(send, 'requests for this credential', limitPerMinute);
  return (req, res, next) => {
    // The hash, never the token: the counter's rows must not become a list of live credentials.
    const credential = requestCredential(req);
    const key = credential ? `t:${credential.key}` : clientKey(req);
    counter.take(`request:${key}`, limitPerMinute).then((d) => {
      headers.set(res, key, d);
      if (d.allowed) next();
      else refuse(res, d.resetTime);
    }, next);
  };
}

/**
 * Counts the 401s a client address receives; past the limit, that address gets 429 for requests
 * whose credential is not known to be valid. A credential this replica authenticated within the
 * last KNOWN_VALID_MS is let through (and not counted), so a flood of made-up tokens from a shared
 * address (a NAT, an office) never locks out the real keys behind it. Every other request takes one
 * from its address's allowance and gives it back once answered with anything but a 401.
 */
export function failedAuthLimiter(limitPerMinute: number, send: Send, counter: RateCounter): RequestHandler {
  const knownValid = new KnownValidCredentials();
  const refuse = limited(send, 'failed authentications from this address', limitPerMinute);
  return (req, res, next) => {
    const credential = credentialOf(req);
    if (credential) {
      res.on('finish', () => {
        if (res.locals[AUTHENTICATED] === true) knownValid.add(credential);
        else if (res.statusCode === 401) knownValid.delete(credential);
      });
      if (knownValid.has(credential)) return next();
    }
    const key = `failed-auth:${clientKey(req)}`;
    counter.take(key, limitPerMinute).then((d) => {
      res.on('finish', () => {
        if (res.statusCode !== 401) counter.giveBack(key);
      });
      if (d.allowed) next();
      else refuse(res, d.resetTime);
    }, next);
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
