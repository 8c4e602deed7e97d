/**
 * Signed caller identity: who a call acts for (the principal: tenant and actor) travels as one
 * short-lived JWT (x-caller-token), signed by the caller (the gateway, or a service with a key of its
 * own) with an asymmetric key and verified by every service against a set of public keys (JWKS, by
 * kid). A service builds its CallContext only from a verified token, so a pod that can reach a
 * service's port cannot act for a tenant by setting metadata. Each token names its target service
 * (aud), so a token a service received cannot be replayed to another one.
 *
 * A token is per (principal, target service), not per call: the signer reuses it for the first half
 * of its life and each service verifies it once (a bounded cache of the tokens it verified, each
 * entry expiring with its token). The per-request fields (request id, client ip, user agent, idempotency key) travel beside
 * it as plain metadata. Signing and verifying Ed25519 on every call would be most of the gateway
 * hop's cost; the trade-off is in docs/decisions.md (caller identity).
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { TokenError, createSigner, createVerifier, type Algorithm } from 'fast-jwt';
import { DOMAINS, isAccessLevel, type AccessLevels, type Domain } from './access.js';
import type { Actor } from './context.js';
import { errors } from './errors.js';

/** The metadata entry that carries the token. */
export const CALLER_TOKEN_KEY = 'x-caller-token';

/** Caller and service clocks may differ by this much. */
const CLOCK_TOLERANCE_MS = 5_000;
/** A short life bounds what a leaked token is worth; the signer reuses one for the first half of it. */
const DEFAULT_TTL_S = 30;
/** At most this many tokens are kept by a signer and, verified, by a verifier (the oldest go first). */
const DEFAULT_CACHE_SIZE = 10_000;

/**
 * The per-request fields beside the token. Binary metadata (-bin, base64 on the wire): the user agent
 * and the idempotency key are the client's text, which grpc-js refuses in plain metadata when it is
 * not printable ASCII.
 */
const REQUEST_ID_KEY = 'x-request-id-bin';
const CLIENT_IP_KEY = 'x-client-ip-bin';
const USER_AGENT_KEY = 'x-user-agent-bin';
const IDEMPOTENCY_KEY_KEY = 'x-idempotency-key-bin';
const IDEMPOTENCY_SEAL_KEY = 'x-idempotency-seal-bin';
/** The JWT type header: a token minted for another purpose is never read as a caller identity. */
const TOKEN_TYPE = 'caller+jwt';

/** Who a call acts for and its request's fields; a service's CallContext is built from it. */
export interface Caller {
  requestId: string;
  /** Unset for platform-admin and unauthenticated calls (tenant bootstrap, invitation claim, OAuth callback). */
  tenantId?: string | undefined;
  actor?: Actor | undefined;
  clientIp?: string | undefined;
  userAgent?: string | undefined;
  /** The client's Idempotency-Key of a write: the service records it with the write (idempotency.ts). */
  idempotencyKey?: string | undefined;
  /**
   * With the key: the keys that seal the response the service stores for it (derived by the gateway
   * from its keyring for this caller and key, as an ENCRYPTION_KEYS value), so a stored one-time
   * secret is readable by no one who holds only the service's database.
   */
  idempotencySeal?: string | undefined;
}

/** A caller signing key and the public key set that verifies it, as CALLER_SIGNING_KEY and CALLER_VERIFY_KEYS hold them. */
export interface CallerKeys {
  /** Private JWK (JSON) with its kid. */
  signingKey: string;
  /** JWKS (JSON) with the matching public key. */
  verifyKeys: string;
}

/** The audience of a call: the full name of the gRPC service its method path names (/pkg.Service/Method). */
export function callerAudience(methodPath: string): string {
  return methodPath.split('/')[1] ?? '';
}

/** A fresh Ed25519 key pair for caller identity (make dev, tests, and operators: see docs/operations.md). */
export function generateCallerKeys(kid: string): CallerKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const meta = { kid, alg: 'EdDSA', use: 'sig' };
  return {
    signingKey: JSON.stringify({ ...privateKey.export({ format: 'jwk' }), ...meta }),
    verifyKeys: JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), ...meta }] }),
  };
}

/** One CALLER_VERIFY_KEYS (JWKS) trusting several signers: the gateway, and services that call others (agents). */
export function mergeVerifyKeys(...jwks: string[]): string {
  return JSON.stringify({
    keys: jwks.flatMap((j) => (parseJson(j, 'the caller verify keys') as { keys?: unknown[] }).keys ?? []),
  });
}

const WHAT_TO_SET =
  'set CALLER_SIGNING_KEY (the signer\'s private JWK with a kid) and CALLER_VERIFY_KEYS ({"keys": [public JWKs with kids]}); docs/operations.md shows how to generate them';

function parseJson(json: string, what: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    throw new Error(`${what} is not JSON; ${WHAT_TO_SET}`);
  }
}

/** A JWK as node:crypto's key and the one algorithm it signs with: Ed25519 → EdDSA, P-256 → ES256; asymmetric only. */
function importKey(
  jwk: JsonWebKey & { kid?: string },
  kind: 'private' | 'public',
): { key: KeyObject; algorithm: Algorithm } {
  let key: KeyObject;
  try {
    key =
      kind === 'private' ? createPrivateKey({ key: jwk, format: 'jwk' }) : createPublicKey({ key: jwk, format: 'jwk' });
  } catch (err) {
    throw new Error(
      `caller key ${jwk.kid ?? ''} is not a valid ${kind} JWK (${(err as Error).message}); ${WHAT_TO_SET}`,
      { cause: err },
    );
  }
  const type = key.asymmetricKeyType;
  const algorithm =
    type === 'ed25519'
      ? 'EdDSA'
      : type === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1'
        ? 'ES256'
        : undefined;
  if (!algorithm) throw new Error(`caller key ${jwk.kid ?? ''} is neither Ed25519 nor P-256; ${WHAT_TO_SET}`);
  return { key, algorithm };
}

/** The claims a caller's token carries for calls to `audience`, its times apart. */
function principalClaims(caller: Caller, audience: string): Record<string, unknown> {
  const actor = caller.actor;
  const claims: Record<string, unknown> = { aud: audience };
  if (caller.tenantId) claims.tenant_id = caller.tenantId;
  if (actor)
    claims.actor = {
      type: actor.type,
      id: actor.id,
      ...(actor.memberId ? { member_id: actor.memberId } : {}),
      ...(actor.access ? { access: actor.access } : {}),
    };
  return claims;
}

/** Signs caller identity for the calls a process makes: the gateway, or a service with its own key. */
export class CallerSigner {
  private readonly signer: (payload: Record<string, unknown>) => string;
  private readonly ttlSeconds: number;
  private readonly maxCached: number;
  /** (audience, principal) → its token and when to sign a fresh one (half its life, in ms). */
  private readonly tokens = new Map<string, { token: string; renewAt: number }>();
  /** A frozen actor's cache keys, by tenant, then audience (cacheKeyOf); gone with the actor. */
  private readonly frozenActorKeys = new WeakMap<Actor, Map<string, Map<string, string>>>();
  /** Who signs (iss): the gateway or a service name, for logs and audits. */
  readonly issuer: string;

  /** From a private JWK (JSON, with kid; Ed25519 or P-256). Throws a message that says what to set. */
  constructor(privateJwk: string, opts: { issuer: string; ttlSeconds?: number; maxCachedTokens?: number }) {
    const parsed: unknown = parseJson(privateJwk, 'the caller signing key');
    if (typeof parsed !== 'object' || parsed === null || !(parsed as JsonWebKey).d)
      throw new Error(`the caller signing key must be a private JWK; ${WHAT_TO_SET}`);
    const jwk = parsed as JsonWebKey & { kid?: string };
    if (!jwk.kid)
      throw new Error(`the caller signing key has no kid (services pick the verifying key by it); ${WHAT_TO_SET}`);
    const { key, algorithm } = importKey(jwk, 'private');
    this.signer = createSigner({
      key: key.export({ type: 'pkcs8', format: 'pem' }) as string,
      algorithm,
      kid: jwk.kid,
      iss: opts.issuer,
      header: { alg: algorithm, typ: TOKEN_TYPE },
    });
    this.issuer = opts.issuer;
    this.ttlSeconds = opts.ttlSeconds ?? DEFAULT_TTL_S;
    this.maxCached = opts.maxCachedTokens ?? DEFAULT_CACHE_SIZE;
  }

  /**
   * The token of the caller's principal (tenant, actor) for calls to `audience` (a gRPC service's
   * full name): signed at most once per half life per (principal, audience).
   */
  sign(caller: Caller, audience: string): string {
    const cacheKey = this.cacheKeyOf(caller, audience);
    const nowMs = Date.now();
    const cached = this.tokens.get(cacheKey);
    if (cached && nowMs < cached.renewAt) return cached.token;
    const now = Math.floor(nowMs / 1000);
    const token = this.signer({ ...principalClaims(caller, audience), iat: now, exp: now + this.ttlSeconds });
    this.tokens.delete(cacheKey); // re-inserted last: the map's order is the order of signing
    if (this.tokens.size >= this.maxCached) this.tokens.delete(this.tokens.keys().next().value!);
    this.tokens.set(cacheKey, { token, renewAt: (now + this.ttlSeconds / 2) * 1000 });
    return token;
  }

  /**
   * The signed claims but the times, serialized: a claim added to the principal later is part of
   * the key without anyone having to remember it. A frozen actor (the gateway freezes the one it
   * makes per looked-up principal) cannot change its claims, so its key is serialized once per
   * tenant and audience rather than on every call.
   */
  private cacheKeyOf(caller: Caller, audience: string): string {
    const actor = caller.actor;
    // An actor seen frozen stays frozen: only a new one is checked (Object.isFrozen is a call into
    // V8's runtime). The maps' keys are strings the caller already holds, whose hashes V8 keeps.
    let byTenant = actor && this.frozenActorKeys.get(actor);
    if (!byTenant) {
      if (!actor || !Object.isFrozen(actor) || (actor.access && !Object.isFrozen(actor.access)))
        return JSON.stringify(principalClaims(caller, audience));
      this.frozenActorKeys.set(actor, (byTenant = new Map<string, Map<string, string>>()));
    }
    const tenant = caller.tenantId ?? '';
    let byAudience = byTenant.get(tenant);
    if (!byAudience) byTenant.set(tenant, (byAudience = new Map<string, string>()));
    let key = byAudience.get(audience);
    if (key === undefined) byAudience.set(audience, (key = JSON.stringify(principalClaims(caller, audience))));
    return key;
  }

  /** Call metadata for a call to `audience`: the principal's token and the request's fields beside it. */
  metadata(caller: Caller, audience: string): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set(CALLER_TOKEN_KEY, this.sign(caller, audience));
    md.set(REQUEST_ID_KEY, Buffer.from(caller.requestId));
    if (caller.clientIp) md.set(CLIENT_IP_KEY, Buffer.from(caller.clientIp));
    if (caller.userAgent) md.set(USER_AGENT_KEY, Buffer.from(caller.userAgent));
    if (caller.idempotencyKey) md.set(IDEMPOTENCY_KEY_KEY, Buffer.from(caller.idempotencyKey));
    if (caller.idempotencySeal) md.set(IDEMPOTENCY_SEAL_KEY, Buffer.from(caller.idempotencySeal));
    return md;
  }
}

/**
 * Verifies caller tokens against a public key set (JWKS): several kids at once, so keys can rotate
 * and other signers (a service with its own key) can be trusted. Each key is imported once, at
 * start-up, into a verifier that accepts only that key's algorithm.
 */
export class CallerVerifier {
  private readonly byKid = new Map<string, (token: string) => Record<string, unknown>>();
  /**
   * Verified tokens by their signature, each with the token itself, which a hit must equal: a
   * token arrives as a new string on every call, and a Map hashes a new string over its whole
   * length (≈ 700 characters; the signature is 86), then compares it.
   */
  private readonly verified = new Map<string, VerifiedToken & { token: string }>();
  private readonly maxCached: number;

  /** From a JWKS (JSON) of public keys, each with a kid. Throws a message that says what to set. */
  constructor(jwksJson: string, opts: { maxCachedTokens?: number } = {}) {
    this.maxCached = opts.maxCachedTokens ?? DEFAULT_CACHE_SIZE;
    const jwks = parseJson(jwksJson, 'the caller verify keys') as { keys?: (JsonWebKey & { kid?: string })[] } | null;
    if (!jwks || !Array.isArray(jwks.keys) || jwks.keys.length === 0)
      throw new Error(`the caller verify keys must be a JWKS with at least one key; ${WHAT_TO_SET}`);
    for (const jwk of jwks.keys) {
      if (!jwk.kid) throw new Error(`every caller verify key needs a kid; ${WHAT_TO_SET}`);
      if (jwk.d)
        throw new Error(
          `caller verify key ${jwk.kid} is a private key: give services only public keys; ${WHAT_TO_SET}`,
        );
      const { key, algorithm } = importKey(jwk, 'public');
      this.byKid.set(
        jwk.kid,
        createVerifier({
          key: key.export({ type: 'spki', format: 'pem' }) as string,
          algorithms: [algorithm],
          checkTyp: TOKEN_TYPE,
          clockTolerance: CLOCK_TOLERANCE_MS,
          requiredClaims: ['exp', 'iat', 'aud'],
          cache: false,
        }),
      );
    }
  }

  get kids(): string[] {
    return [...this.byKid.keys()];
  }

  /**
   * The caller of a call to `audience`: the principal from its verified token, the request's fields
   * from the metadata beside it; UNAUTHENTICATED (CALLER_IDENTITY_INVALID) otherwise.
   */
  verify(metadata: grpc.Metadata, audience: string): Caller {
    const token = metadata.get(CALLER_TOKEN_KEY)[0];
    if (typeof token !== 'string' || token === '') {
      throw invalid(
        `the call carries no caller identity (${CALLER_TOKEN_KEY}): services accept only calls signed by the gateway or by a service whose key is in their CALLER_VERIFY_KEYS; call through the gateway`,
      );
    }
    const signature = token.slice(token.lastIndexOf('.') + 1);
    let verified = this.verified.get(signature);
    if (verified && verified.token !== token) verified = undefined; // another token with that signature: verified below, and refused
    if (verified && Date.now() >= verified.acceptedUntil) {
      this.verified.delete(signature);
      verified = undefined; // verified again below, which says it has expired
    }
    if (!verified) {
      verified = { ...this.verifyToken(token), token };
      if (this.verified.size >= this.maxCached) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(signature, verified);
    }
    if (verified.audience !== audience)
      throw invalid(
        `the caller identity token is not for this service (${audience}): sign one token per target service`,
      );
    const requestId = text(metadata, REQUEST_ID_KEY);
    if (!requestId)
      throw invalid(
        `the call carries no request id (${REQUEST_ID_KEY}) beside its caller identity: the signer sets it (CallerSigner.metadata)`,
      );
    return {
      requestId,
      tenantId: verified.tenantId,
      actor: verified.actor,
      clientIp: text(metadata, CLIENT_IP_KEY),
      userAgent: text(metadata, USER_AGENT_KEY),
      idempotencyKey: text(metadata, IDEMPOTENCY_KEY_KEY),
      idempotencySeal: text(metadata, IDEMPOTENCY_SEAL_KEY),
    };
  }

  /** Signature, type, expiry and claims of a token not seen before (or seen expired). */
  private verifyToken(token: string): VerifiedToken {
    const kid = kidOf(token);
    if (kid === undefined)
      throw invalid(`the caller identity token is not a JWT with a kid in its header; ${WHAT_TO_SET}`);
    const verifier = this.byKid.get(kid);
    if (!verifier) {
      throw invalid(
        `the caller identity token is signed by key ${JSON.stringify(kid.slice(0, 64))}, which is not in this service's CALLER_VERIFY_KEYS: add the signer's public key there`,
      );
    }
    let payload: Record<string, unknown>;
    try {
      payload = verifier(token);
    } catch (err) {
      throw invalid(describeFailure(err));
    }
    // fast-jwt accepts a token until exp plus the clock tolerance; the cache does the same.
    return {
      ...principalOf(payload),
      audience: payload.aud,
      acceptedUntil: (payload.exp as number) * 1000 + CLOCK_TOLERANCE_MS,
    };
  }
}

interface VerifiedToken {
  audience: unknown;
  tenantId: string | undefined;
  actor: Actor | undefined;
  acceptedUntil: number;
}

/** A per-request field beside the token (binary metadata, UTF-8). */
function text(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return Buffer.isBuffer(value) && value.length > 0 ? value.toString() : undefined;
}

/** The kid of a token's header (read before verification only to pick the key; the signature covers it). */
function kidOf(token: string): string | undefined {
  try {
    const header = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString()) as {
      kid?: unknown;
    };
    return typeof header.kid === 'string' ? header.kid : undefined;
  } catch {
    return undefined;
  }
}

function invalid(message: string) {
  return errors.unauthenticated('CALLER_IDENTITY_INVALID', message);
}

function describeFailure(err: unknown): string {
  const code = err instanceof TokenError ? err.code : undefined;
  if (code === TokenError.codes.expired)
    return "the caller identity token has expired: the signer must renew its tokens before they expire (CallerSigner does; check that the caller's and this service's clocks agree)";
  if (code === TokenError.codes.invalidSignature)
    return "the caller identity token's signature does not verify: it was altered, or signed by another key under a known kid";
  return `the caller identity token is not valid (${code ?? 'malformed'}): the caller must sign a ${TOKEN_TYPE} JWT with a key in this service's CALLER_VERIFY_KEYS`;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Claims → principal; a signed token with claims of the wrong shape is refused, not half-read. */
function principalOf(p: Record<string, unknown>): { tenantId: string | undefined; actor: Actor | undefined } {
  const actorClaim = p.actor as { type?: unknown; id?: unknown; member_id?: unknown; access?: unknown } | undefined;
  const access = actorClaim?.access === undefined ? undefined : accessOf(actorClaim.access);
  if (
    (p.tenant_id !== undefined && !str(p.tenant_id)) ||
    (actorClaim !== undefined && (!str(actorClaim.type) || !str(actorClaim.id))) ||
    access === null
  ) {
    throw invalid(
      "the caller identity token's claims are malformed (tenant_id, actor {type, id, member_id, access}): fix the signer",
    );
  }
  const memberId = str(actorClaim?.member_id);
  return {
    tenantId: str(p.tenant_id),
    actor: actorClaim
      ? {
          type: actorClaim.type as string,
          id: actorClaim.id as string,
          ...(memberId ? { memberId } : {}),
          ...(access ? { access } : {}),
        }
      : undefined,
  };
}

/** The access claim ({domain: level}), or null when it is not of that shape (the whole token is refused). */
function accessOf(claim: unknown): AccessLevels | null {
  if (typeof claim !== 'object' || claim === null || Array.isArray(claim)) return null;
  const access: AccessLevels = {};
  for (const [domain, level] of Object.entries(claim)) {
    if (!(DOMAINS as readonly string[]).includes(domain) || !isAccessLevel(level)) return null;
    access[domain as Domain] = level;
  }
  return access;
}
