/**
 * Idempotency-Key in the gRPC kit: what a keyed call records (the SQL and the transactions' part are
 * @workauto/db's runKeyed), described once per rpc from its definition. The gateway stores its own
 * copy of each outcome too; this one, committed with the write, is what makes a retry after an
 * unknown outcome (504, a reset, a gateway that died) safe (docs/api.md, Idempotency).
 */
import { createHash } from 'node:crypto';
import { Keyring } from '@workauto/crypto';
import { IdempotencyKeyInUseError, type KeyedWrite } from '@workauto/db';
import type { CallContext } from './context.js';

/** Response metadata of a call answered with the stored response of an earlier call with its key. */
export const IDEMPOTENT_REPLAYED_KEY = 'x-idempotent-replayed';

/**
 * Whose a key is: the caller's tenant and actor (one credential is one actor). The gateway derives
 * the sealing keys from the same value.
 */
export function idempotencyScope(caller: { tenantId?: string | undefined; actor?: { type: string; id: string } }) {
  return `${caller.tenantId ?? '-'}/${caller.actor?.type ?? 'anonymous'}/${caller.actor?.id ?? '-'}`;
}

/** The HKDF purpose of the keys that seal the responses stored for (scope, key). */
export function idempotencySealInfo(scope: string, key: string): string {
  return `workauto idempotency response\0${scope}\0${key}`;
}

/** Of what a request asks (a method or route, and the request with object keys in any order): equal requests, equal prints. */
export function requestFingerprint(what: string, request: unknown): string {
  return createHash('sha256').update(what).update('\0').update(canonicalJson(request)).digest('hex');
}

/** JSON with object keys sorted, so the same request always prints the same. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v) && !(v instanceof Uint8Array)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v instanceof Uint8Array
        ? Buffer.from(v).toString('base64')
        : v,
  );
}

/** A unary rpc's (de)serializers, as ts-proto's definitions have them. */
export interface ResponseCodec {
  path: string;
  responseSerialize(value: never): Buffer;
  responseDeserialize?(bytes: Buffer): unknown;
}

/** One rpc's side of keyed calls: which transaction result is its response, and how it is stored and read back. */
export class KeyedMethod {
  /** The response message's fields, and those a message always has (not optional). */
  private readonly fields: Set<string>;
  private readonly required: string[];
  /** A response without fields (google.protobuf.Empty): whatever the transaction returns, the response is known. */
  private readonly empty: boolean;

  constructor(private readonly codec: ResponseCodec) {
    const template = (codec.responseDeserialize?.(Buffer.alloc(0)) ?? {}) as Record<string, unknown>;
    this.fields = new Set(Object.keys(template));
    this.required = Object.keys(template).filter((k) => template[k] !== undefined);
    this.empty = codec.responseDeserialize !== undefined && this.fields.size === 0;
  }

  /** The record of a call, or undefined when it carries no key (or no sealing keys: then nothing can be stored). */
  write(request: unknown, ctx: CallContext): (KeyedWrite & { replay(stored: string): unknown }) | undefined {
    const { idempotencyKey: key, idempotencySeal } = ctx;
    if (!key || !idempotencySeal || !this.codec.responseDeserialize) return undefined;
    const scope = idempotencyScope(ctx);
    const seal = Keyring.fromEnv(idempotencySeal);
    const context = `idempotency:${scope}:${key}`;
    const serialize = (response: unknown) => this.codec.responseSerialize(response as never);
    const deserialize = this.codec.responseDeserialize.bind(this.codec);
    const stored = (response: unknown) => seal.encrypt(serialize(response).toString('base64'), context);
    return {
      scope,
      key,
      fingerprint: requestFingerprint(this.codec.path, request),
      storedForm: (result) => {
        if (this.empty) return stored({});
        if (!this.isResponse(result)) return undefined;
        try {
          return stored(result);
        } catch {
          return undefined; // not a message of the response type after all
        }
      },
      recorded: (result, response) => this.empty || result === response,
      replay: (text) => {
        let bytes: Buffer;
        try {
          bytes = Buffer.from(seal.decrypt(text, context), 'base64');
        } catch {
          // Sealed with a gateway key no longer in ENCRYPTION_KEYS: the response cannot be read back.
          throw new IdempotencyKeyInUseError(true);
        }
        return deserialize(bytes);
      },
    };
  }

  /** A plain object with the response message's fields (and no others): the handler's `return withTransaction(…)`. */
  private isResponse(result: unknown): boolean {
    if (!result || typeof result !== 'object' || Array.isArray(result) || result instanceof Uint8Array) return false;
    const keys = Object.keys(result);
    return keys.every((k) => this.fields.has(k)) && this.required.every((k) => k in result);
  }
}
