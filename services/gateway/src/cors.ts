/**
 * CORS (docs/api.md §13) for the origins in CORS_ALLOWED_ORIGINS; none configured (the default)
 * means no CORS header at all. A response to an allowed origin carries Access-Control-Allow-Origin
 * with that origin and exposes the headers a client reads; a preflight from one is answered 204
 * without a credential, with the methods the route table has for the path. A disallowed origin
 * gets no Access-Control-* header, so the browser refuses the call. No cookies are used, so
 * Access-Control-Allow-Credentials is never sent.
 */
import type { Request, RequestHandler } from 'express';
import { z } from '@workauto/config';
import { matchRoute, type Route } from './routes.js';

const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Request-Id';
const CORS_EXPOSE_HEADERS = 'X-Request-Id, RateLimit, RateLimit-Policy, Retry-After, Idempotent-Replayed';
/** How long a browser may reuse a preflight's answer (seconds). */
const CORS_MAX_AGE = '600';

/** A host an origin can name: a DNS name of letters, digits and hyphens between dots, or an IP literal. */
const HOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$|^\[[0-9a-f:.]+\]$/;

/**
 * `https://app.example.com` (a trailing `/` is allowed) → its origin; anything else (a path, a
 * query, user info, another scheme, a wildcard, a host no browser sends) throws, naming it and
 * showing `example`. Origins are compared exactly: `*` or `https://*.example.com` would otherwise
 * be kept as a literal that matches no browser's Origin, silently.
 */
export function parseOrigin(entry: string, example = 'https://app.example.com'): string {
  if (entry.includes('*'))
    throw new Error(
      `${JSON.stringify(entry)} is a wildcard, which is not supported: list each origin exactly, e.g. ${example}`,
    );
  let url: URL | undefined;
  try {
    url = new URL(entry);
  } catch {
    // not a URL: refused below
  }
  const origin =
    url && (url.protocol === 'https:' || url.protocol === 'http:') && HOST_NAME.test(url.hostname)
      ? url.origin
      : undefined;
  if (!origin || (entry !== origin && entry !== `${origin}/`))
    throw new Error(
      `${JSON.stringify(entry)} is not an origin: write scheme://host[:port] with no path, e.g. ${example}`,
    );
  return origin;
}

/**
 * `https://app.example.com,http://localhost:5173` → the origins; an entry that is not an origin
 * (scheme, host and port only) throws, naming it.
 */
export function parseAllowedOrigins(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => parseOrigin(entry));
}

/** The CORS_ALLOWED_ORIGINS variable: a bad entry stops the start, naming the variable and the entry. */
export function corsAllowedOriginsVar() {
  return z
    .string()
    .default('')
    .transform((text, ctx) => {
      try {
        return parseAllowedOrigins(text);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return [];
      }
    });
}

function allowedOrigin(req: Request, allowed: ReadonlySet<string>): string | undefined {
  const origin = req.get('origin');
  return origin && allowed.has(origin) ? origin : undefined;
}

/**
 * First in the pipeline: every response to an allowed origin, errors and 429s included, carries
 * the headers the browser needs to let the page read it.
 */
export function corsHeaders(origins: readonly string[]): RequestHandler {
  const allowed = new Set(origins);
  return (req, res, next) => {
    if (!allowed.size) return next();
    res.vary('Origin');
    const origin = allowedOrigin(req, allowed);
    if (origin) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSE_HEADERS);
    }
    next();
  };
}

/**
 * A preflight (`OPTIONS` with Access-Control-Request-Method) from an allowed origin for a path of
 * the route table: 204 with the path's methods. Mounted after the per-address rate limit (a
 * preflight carries no credential) and before authentication. Anything else goes on (and a
 * preflight from another origin ends as the 405 of any unsupported method, with no CORS header).
 */
export function corsPreflight(origins: readonly string[], routes: Route[]): RequestHandler {
  const allowed = new Set(origins);
  return (req, res, next) => {
    if (req.method !== 'OPTIONS' || !req.get('access-control-request-method')) return next();
    const origin = allowedOrigin(req, allowed);
    if (!origin) return next();
    const match = matchRoute(routes, 'OPTIONS', req.originalUrl.split('?')[0] ?? '');
    if (!match || !('methodNotAllowed' in match)) return next();
    res.setHeader('Access-Control-Allow-Methods', match.methodNotAllowed.join(', '));
    res.setHeader('Access-Control-Allow-Headers', CORS_ALLOW_HEADERS);
    res.setHeader('Access-Control-Max-Age', CORS_MAX_AGE);
    res.status(204).end();
  };
}
