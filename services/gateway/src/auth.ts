/**
 * Who is calling: bearer token → principal, resolved by identity's AuthenticateToken, and the
 * answer cached for at most ttlMs (the replica that serves an identity mutation clears its cache at
 * once). Reads use the cache within that TTL. Writes use it only while this replica's write lease
 * holds (write-lease.ts): identity answers a change that may take a grant away (a key revoked, a
 * member deactivated, a role or access policy changed) only once every replica has either
 * forgotten its cached credentials or stopped using them for writes, so a revoked grant creates and
 * changes nothing through any replica from the moment its revocation is answered (docs/identity.md,
 * "The gateway's authentication cache").
 */
import { hash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import {
  isDomain,
  levelAtLeast,
  type AccessLevels,
  type Domain,
  type Downstream,
  protoAccessLevel,
} from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { ActorType, IdentityServiceService, type Principal } from '@workauto/protos/workauto/identity/v1/identity.js';
import type { Clock } from '@workauto/retry';
import { requestCost } from './cost.js';
import { gatewayErrors } from './errors.js';
import { TOKEN_FIELD, type Route } from './routes.js';
import type { TenantLimits } from './tenant-limits.js';
import { WriteLease, type RevocationEpoch } from './write-lease.js';

const accessByPrincipal = new WeakMap<Principal, AccessLevels>();

/** A principal's effective levels by domain, as the caller identity signs them for services (once per lookup). */
export function accessLevels(principal: Principal): AccessLevels {
  let access = accessByPrincipal.get(principal);
  if (!access) {
    access = {};
    for (const [domain, level] of Object.entries(principal.access)) {
      if (isDomain(domain)) access[domain] = protoAccessLevel.toLevel(level) ?? 'none';
    }
    accessByPrincipal.set(principal, Object.freeze(access));
  }
  return access;
}

const MAX_ENTRIES = 10_000;

function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1];
}

/** One-shot (no Hash object per request: a quarter of createHash's time for a key's few dozen bytes). */
function tokenKey(token: string): string {
  return hash('sha256', token, 'base64url');
}

/** A request's bearer token and its hash. */
export interface RequestCredential {
  token: string;
  /** tokenKey(token): what the limiters, the auth cache and the idempotency scope key by. */
  key: string;
}

/**
 * Where a request keeps what the gateway works out about it once: a symbol-keyed property of the
 * request object rather than a WeakMap keyed by it (a WeakMap entry per request is an ephemeron the
 * garbage collector must trace: ≈ 0.3 µs per entry in a loop).
 */
const CREDENTIAL = Symbol('workauto.credential');

/** The request's bearer credential, hashed once per request (both limiters, auth and idempotency use it). */
export function requestCredential(req: { get(name: string): string | undefined }): RequestCredential | undefined {
  const held = req as { [CREDENTIAL]?: RequestCredential | null };
  let credential = held[CREDENTIAL];
  if (credential === undefined) {
    const token = bearerToken(req.get('authorization'));
    credential = token ? { token, key: tokenKey(token) } : null;
    held[CREDENTIAL] = credential;
  }
  return credential ?? undefined;
}

/** Whether a query carries the token of an AUTH_API_KEY_OR_TOKEN route (given twice it is the service's 400 to answer). */
function hasToken(query: unknown): boolean {
  const token = (query as Record<string, unknown> | undefined)?.[TOKEN_FIELD];
  return token !== undefined && token !== '';
}

/** What admission reads of a request: its method, its body (the cost) and its headers. */
interface AdmittedRequest {
  method: string;
  body?: unknown;
  get(name: string): string | undefined;
}

/** A request as admit() marks it: its hold on its tenant's limits, under the Authenticator's own symbol. */
type Admitted = Record<symbol, (() => void) | undefined>;

export class Authenticator {
  /** SHA-256 of the token → the lookup (pending or done) and when it stops counting. */
  private readonly cache = new Map<string, { lookup: Promise<Principal>; expires: number }>();
  /** The request's property that ends its hold on its tenant's limits (finished(req) calls it; as CREDENTIAL). */
  private readonly admitted = Symbol('workauto.admitted');

  /** Unset: every write asks identity. */
  private readonly writeLease: WriteLease | undefined;

  constructor(
    private readonly identity: () => Downstream | undefined,
    private readonly ttlMs: number,
    private readonly tenantLimits?: TenantLimits,
    /** The credential lookup's share of a request's budget: it must leave time for the call itself. */
    private readonly lookupDeadlineMs = 3_000,
    /** Writes may use the cache while identity's write lease holds: `metadata` signs the epoch's reads. */
    writeCache?: { metadata: () => grpc.Metadata; logger?: Logger; clock?: Clock },
  ) {
    if (writeCache && ttlMs > 0)
      this.writeLease = new WriteLease(
        () => this.revocationEpoch(writeCache.metadata()),
        () => this.clear(),
        writeCache.logger,
        writeCache.clock,
      );
  }

  clear(): void {
    this.cache.clear();
  }

  /** Ends the revocation epoch's reads (the gateway closes). */
  async stop(): Promise<void> {
    await this.writeLease?.stop();
  }

  /** The request is answered (or failed): its tenant's in-flight count goes down. */
  finished(req: object): void {
    const held = req as Admitted;
    const release = held[this.admitted];
    held[this.admitted] = undefined;
    release?.();
  }

  /**
   * Admits a request under its tenant's limits (in flight, and its budget per minute charged with
   * the request's cost), held until finished(req): the whole request, its downstream call included.
   * authorize does it for a request with a key; a request with a token is admitted under the
   * token's tenant (token-tenants.ts).
   */
  async admit(req: AdmittedRequest, tenant: string): Promise<void> {
    if (!this.tenantLimits) return;
    const release = await this.tenantLimits.admit(tenant, requestCost(req));
    (req as object as Admitted)[this.admitted] = release;
  }

  /** The principal of a route's call, or a 401/403 as docs/api.md §2 says; `metadata` signs the lookup's call to identity. */
  async authorize(
    route: Pick<Route, 'auth' | 'method' | 'domain' | 'level'>,
    req: AdmittedRequest & { query?: unknown },
    metadata: () => grpc.Metadata,
  ): Promise<Principal | undefined> {
    if (route.auth === 'none') return undefined;
    // A token the service checks (a feed URL's): no Authorization header, a non-empty `token`, no principal.
    if (route.auth === 'api_key_or_token' && req.get('authorization') === undefined && hasToken(req.query))
      return undefined;
    const credential = requestCredential(req);
    if (!credential) {
      throw gatewayErrors.unauthenticated(
        req.get('authorization')
          ? 'the Authorization header must be "Bearer <key>"'
          : route.auth === 'api_key_or_token'
            ? `this endpoint needs an API key (send "Authorization: Bearer <key>") or its feed URL's ${TOKEN_FIELD} parameter`
            : 'this endpoint needs an API key: send "Authorization: Bearer <key>"',
      );
    }
    const write = route.method !== 'GET';
    const principal = await this.resolve(credential, metadata, write && !this.writeLease?.writesMayUseCache());
    this.check(route, principal);
    if (route.auth !== 'platform_admin') await this.admit(req, principal.tenant_id);
    return principal;
  }

  /**
   * The credential's principal as identity says it is now (never from the cache): whether an open
   * stream may go on (stream-watch.ts, which asks once per credential however many streams it has).
   */
  current(credential: RequestCredential, metadata: () => grpc.Metadata): Promise<Principal> {
    return this.resolve(credential, metadata, true);
  }

  /** Throws the 403 a principal gets on the route: the wrong kind of credential, or too low a level in its domain. */
  check(route: Pick<Route, 'auth' | 'domain' | 'level'>, principal: Principal): void {
    const isAdmin = principal.actor_type === ActorType.ACTOR_TYPE_PLATFORM_ADMIN;
    if (route.auth === 'platform_admin') {
      if (!isAdmin)
        throw gatewayErrors.forbidden('this endpoint needs the platform admin token', 'PLATFORM_ADMIN_REQUIRED');
      return;
    }
    if (isAdmin || !principal.tenant_id)
      throw gatewayErrors.forbidden(
        'this endpoint needs a tenant API key, not the platform admin token',
        'TENANT_CREDENTIAL_REQUIRED',
      );
    if (route.domain) {
      // The principal's levels as mapped once per lookup (accessLevels), not the enum's name per request.
      const have = accessLevels(principal)[route.domain as Domain] ?? 'none';
      if (!levelAtLeast(have, route.level)) {
        throw gatewayErrors.forbidden(
          `this needs ${route.level} access to ${route.domain}; your access there is ${have}. Ask an admin to change your role or access policy`,
          'ACCESS_DENIED',
          { domain: route.domain, required_level: route.level, actual_level: have },
        );
      }
    }
  }

  private revocationEpoch(metadata: grpc.Metadata): Promise<RevocationEpoch> {
    const identity = this.identity();
    if (!identity) return Promise.reject(gatewayErrors.notConfigured('identity', 'IDENTITY_ADDR'));
    return identity.call(
      IdentityServiceService.getRevocationEpoch,
      {},
      { metadata, deadlineMs: this.lookupDeadlineMs },
    );
  }

  /** fresh: ask identity even on a cache hit (a write without a lease), and let its answer replace the cached one. */
  private resolve(
    { token, key }: RequestCredential,
    metadata: () => grpc.Metadata,
    fresh: boolean,
  ): Promise<Principal> {
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.expires > now && !fresh) return hit.lookup;
    const identity = this.identity();
    if (!identity) return Promise.reject(gatewayErrors.notConfigured('identity', 'IDENTITY_ADDR'));
    const lookup = identity.call(
      IdentityServiceService.authenticateToken,
      { token },
      { metadata: metadata(), deadlineMs: this.lookupDeadlineMs },
    );
    if (this.ttlMs > 0) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
      // The TTL runs from the lookup's start: no answer is used longer than ttlMs after identity gave it.
      // Concurrent requests with the same token share one lookup while it is pending.
      this.cache.set(key, { lookup, expires: now + this.ttlMs });
      lookup.catch(() => {
        // Failures (bad token, identity down) are not cached; a mutation's refusal also ends the cached reads.
        if (this.cache.get(key)?.lookup === lookup) this.cache.delete(key);
      });
    }
    return lookup;
  }
}
