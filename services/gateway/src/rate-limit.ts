/**
 * Requests per minute per credential (the token's hash) or, without one, per client address; and
 * failed authentications per client address, so rotating made-up tokens (each its own credential
 * key) cannot probe keys or load identity without limit. In memory: the limits are per replica.
 */
import type { Request, RequestHandler, Response } from 'express';
import { rateLimit, ipKeyGenerator } from 'express-rate-limit';
import * as grpc from '@grpc/grpc-js';
import { bearerToken, tokenKey } from './auth.js';
import { GatewayError } from './errors.js';

const WINDOW_MS = 60_000;

type Send = (res: Response, err: unknown) => void;

const clientKey = (req: Request) => `ip:${ipKeyGenerator(req.ip ?? '')}`;

function limited(send: Send, what: string, limitPerMinute: number) {
  return (req: Request, res: Response) => {
    const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
    const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + WINDOW_MS) - Date.now()) / 1000));
    send(
      res,
      new GatewayError(grpc.status.RESOURCE_EXHAUSTED, 'RATE_LIMITED', `too many ${what} (limit ${limitPerMinute} per minute); retry after ${retryAfter} s`, undefined, {
        headers: { 'Retry-After': String(retryAfter) },
        metadata: { limit_per_minute: String(limitPerMinute), retry_after_seconds: String(retryAfter) },
      }),
    );
  };
}

export function rateLimiter(limitPerMinute: number, send: Send): RequestHandler {
  return rateLimit({
    windowMs: WINDOW_MS,
    limit: limitPerMinute,
    standardHeaders: 'draft-8',
    legacyHeaders: false,
    keyGenerator: (req) => {
      const token = bearerToken(req.get('authorization'));
      // The hash, never the token: the store must not become a list of live credentials.
      return token ? `t:${tokenKey(token)}` : clientKey(req);
    },
    handler: limited(send, 'requests for this credential', limitPerMinute),
  });
}

/** Counts only the 401s a client address receives; past the limit, that address waits. */
export function failedAuthLimiter(limitPerMinute: number, send: Send): RequestHandler {
  return rateLimit({
    windowMs: WINDOW_MS,
    limit: limitPerMinute,
    standardHeaders: false,
    legacyHeaders: false,
    keyGenerator: clientKey,
    skipSuccessfulRequests: true,
    requestWasSuccessful: (_req, res) => res.statusCode !== 401,
    handler: limited(send, 'failed authentications from this address', limitPerMinute),
  });
}
