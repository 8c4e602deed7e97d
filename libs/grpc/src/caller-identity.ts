/**
 * Signed caller identity: who a call acts for travels as one short-lived JWT (x-caller-token),
 * signed by the caller (the gateway, or a service with a key of its own) with an asymmetric key and
 * verified by every service against a set of public keys (JWKS, by kid). A service builds its
 * CallContext only from a verified token, so a pod that can reach a service's port cannot act for a
 * tenant by setting metadata. Each token names its target service (aud), so a token a service
 * received cannot be replayed to another one.
 */
import { generateKeyPairSync } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { SignJWT, createLocalJWKSet, errors as jose, importJWK, jwtVerify, type CryptoKey, type JSONWebKeySet, type JWK, type JWTPayload } from 'jose';
import type { Actor } from './context.js';
import { errors } from './errors.js';

/** The metadata entry that carries the token. */
export const CALLER_TOKEN_KEY = 'x-caller-token';

/** Asymmetric signatures only: a service that verifies cannot sign. */
const ALGORITHMS = ['EdDSA', 'Ed25519', 'ES256'];
/** Caller and service clocks may differ by this much. */
const CLOCK_TOLERANCE_S = 5;
/** A token is used at once (one per call), so a short life bounds what a leaked one is worth. */
const DEFAULT_TTL_S = 30;
/** The JWT type header: a token minted for another purpose is never read as a caller identity. */
const TOKEN_TYPE = 'caller+jwt';

/** What a token says about the caller; a service's CallContext is built from it. */
export interface Caller {
  requestId: string;
  /** Unset for platform-admin and unauthenticated calls (tenant bootstrap, invitation claim, OAuth callback). */
  tenantId?: string | undefined;
  actor?: Actor | undefined;
  clientIp?: string | undefined;
  userAgent?: string | undefined;
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

function parseJson(json: string, what: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    throw new Error(`${what} is not JSON; ${WHAT_TO_SET}`);
  }
}

const WHAT_TO_SET =
  'set CALLER_SIGNING_KEY (the signer\'s private JWK with a kid) and CALLER_VERIFY_KEYS ({"keys": [public JWKs with kids]}); docs/operations.md shows how to generate them';

function keyAlgorithm(jwk: JWK): string {
  if (jwk.alg) return jwk.alg;
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return 'EdDSA';
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return 'ES256';
  throw new Error(`caller key ${jwk.kid ?? ''} is neither Ed25519 nor P-256; ${WHAT_TO_SET}`);
}

/** Signs caller identity for the calls a process makes: the gateway, or a service with its own key. */
export class CallerSigner {
  private constructor(
    private readonly key: CryptoKey,
    private readonly header: { alg: string; kid: string; typ: string },
    /** Who signs (iss): the gateway or a service name, for logs and audits. */
    readonly issuer: string,
    private readonly ttlSeconds: number,
  ) {}

  /** From a private JWK (JSON, with kid; Ed25519 or P-256). Throws a message that says what to set. */
  static async create(privateJwk: string, opts: { issuer: string; ttlSeconds?: number }): Promise<CallerSigner> {
    const jwk = parseJson(privateJwk, 'the caller signing key') as JWK;
    if (typeof jwk !== 'object' || jwk === null || !jwk.d) throw new Error(`the caller signing key must be a private JWK; ${WHAT_TO_SET}`);
    if (!jwk.kid) throw new Error(`the caller signing key has no kid (services pick the verifying key by it); ${WHAT_TO_SET}`);
    const alg = keyAlgorithm(jwk);
    if (!ALGORITHMS.includes(alg)) throw new Error(`the caller signing key's alg ${alg} is not one of ${ALGORITHMS.join(', ')}; ${WHAT_TO_SET}`);
    const key = (await importJWK(jwk, alg)) as CryptoKey;
    return new CallerSigner(key, { alg, kid: jwk.kid, typ: TOKEN_TYPE }, opts.issuer, opts.ttlSeconds ?? DEFAULT_TTL_S);
  }

  /** A token for one call to `audience` (a gRPC service's full name). */
  sign(caller: Caller, audience: string): Promise<string> {
    const claims: JWTPayload = { request_id: caller.requestId };
    if (caller.tenantId) claims.tenant_id = caller.tenantId;
    if (caller.actor) claims.actor = { type: caller.actor.type, id: caller.actor.id, ...(caller.actor.memberId ? { member_id: caller.actor.memberId } : {}) };
    if (caller.clientIp) claims.client_ip = caller.clientIp;
    if (caller.userAgent) claims.user_agent = caller.userAgent;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader(this.header)
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setIssuedAt(now)
      .setExpirationTime(now + this.ttlSeconds)
      .sign(this.key);
  }

  /** Call metadata carrying the caller's token for `audience`. */
  async metadata(caller: Caller, audience: string): Promise<grpc.Metadata> {
    const md = new grpc.Metadata();
    md.set(CALLER_TOKEN_KEY, await this.sign(caller, audience));
    return md;
  }
}

/**
 * Verifies caller tokens against a public key set (JWKS): several kids at once, so keys can rotate
 * and other signers (a service with its own key) can be trusted. Imported keys are cached by jose's
 * local key set, so a verification is one signature check.
 */
export class CallerVerifier {
  private readonly keys: ReturnType<typeof createLocalJWKSet>;
  readonly kids: string[];

  /** From a JWKS (JSON) of public keys, each with a kid. Throws a message that says what to set. */
  constructor(jwksJson: string) {
    const jwks = parseJson(jwksJson, 'the caller verify keys') as JSONWebKeySet;
    if (!jwks || !Array.isArray(jwks.keys) || jwks.keys.length === 0) throw new Error(`the caller verify keys must be a JWKS with at least one key; ${WHAT_TO_SET}`);
    for (const k of jwks.keys) {
      if (!k.kid) throw new Error(`every caller verify key needs a kid; ${WHAT_TO_SET}`);
      if (k.d) throw new Error(`caller verify key ${k.kid} is a private key: give services only public keys; ${WHAT_TO_SET}`);
      keyAlgorithm(k);
    }
    this.kids = jwks.keys.map((k) => k.kid!);
    this.keys = createLocalJWKSet(jwks);
  }

  /** The caller of a call to `audience`, from its verified token; UNAUTHENTICATED (CALLER_IDENTITY_INVALID) otherwise. */
  async verify(metadata: grpc.Metadata, audience: string): Promise<Caller> {
    const token = metadata.get(CALLER_TOKEN_KEY)[0];
    if (typeof token !== 'string' || token === '') {
      throw invalid(`the call carries no caller identity (${CALLER_TOKEN_KEY}): services accept only calls signed by the gateway or by a service whose key is in their CALLER_VERIFY_KEYS; call through the gateway`);
    }
    let payload: JWTPayload;
    let kid: string | undefined;
    try {
      ({ payload, protectedHeader: { kid } } = await jwtVerify(token, this.keys, { algorithms: ALGORITHMS, audience, clockTolerance: CLOCK_TOLERANCE_S, typ: TOKEN_TYPE, requiredClaims: ['exp', 'iat'] }));
    } catch (err) {
      throw invalid(describeFailure(err, audience));
    }
    if (!kid) throw invalid(`the caller identity token has no kid; ${WHAT_TO_SET}`);
    return callerOf(payload);
  }
}

function invalid(message: string) {
  return errors.unauthenticated('CALLER_IDENTITY_INVALID', message);
}

function describeFailure(err: unknown, audience: string): string {
  if (err instanceof jose.JWTExpired) return 'the caller identity token has expired: sign a fresh one for each call (and check that the caller\'s and this service\'s clocks agree)';
  if (err instanceof jose.JWKSNoMatchingKey) return 'the caller identity token is signed by a key that is not in this service\'s CALLER_VERIFY_KEYS: add the signer\'s public key (by its kid) there';
  if (err instanceof jose.JWSSignatureVerificationFailed) return 'the caller identity token\'s signature does not verify: it was altered, or signed by another key with a known kid';
  if (err instanceof jose.JWTClaimValidationFailed && err.claim === 'aud') return `the caller identity token is not for this service (${audience}): sign one token per target service`;
  if (err instanceof jose.JOSEAlgNotAllowed) return `the caller identity token's algorithm is not allowed (use one of ${ALGORITHMS.join(', ')})`;
  return `the caller identity token is not valid (${err instanceof jose.JOSEError ? err.code : 'malformed'}): the caller must sign a JWT with a key in this service's CALLER_VERIFY_KEYS`;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** Claims → Caller; a signed token with claims of the wrong shape is refused, not half-read. */
function callerOf(p: JWTPayload): Caller {
  const requestId = str(p.request_id);
  const actorClaim = p.actor as { type?: unknown; id?: unknown; member_id?: unknown } | undefined;
  if (!requestId || (p.tenant_id !== undefined && !str(p.tenant_id)) || (actorClaim !== undefined && (!str(actorClaim.type) || !str(actorClaim.id)))) {
    throw invalid('the caller identity token\'s claims are malformed (request_id, tenant_id, actor {type, id, member_id}): fix the signer');
  }
  const memberId = str(actorClaim?.member_id);
  return {
    requestId,
    tenantId: str(p.tenant_id),
    actor: actorClaim ? { type: actorClaim.type as string, id: actorClaim.id as string, ...(memberId ? { memberId } : {}) } : undefined,
    clientIp: str(p.client_ip),
    userAgent: str(p.user_agent),
  };
}
