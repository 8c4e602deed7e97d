import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import {
  CallerSigner,
  Downstream,
  callerAudience,
  decodeStatusDetails,
  generateCallerKeys,
  type AccessLevels,
  type Caller,
  type ErrorDetails,
  type UnaryMethod,
} from '@workauto/grpc';

/**
 * The caller identity keys of this test process: services under test get `verifyKeys`
 * (callerVerifyKeys), and TestClient signs every call with the private half, as the gateway does.
 */
export const testCallerKeys = generateCallerKeys('test');

/** The test process's signer (issuer `test`), as the gateway signs. */
export const testSigner = new CallerSigner(testCallerKeys.signingKey, { issuer: 'test' });

/** Options of a call through TestClient: who it acts for (signed at the call), or metadata as given. */
export interface TestCallOptions {
  caller?: Caller;
  metadata?: grpc.Metadata;
  deadlineMs?: number;
  /** Gets the response's initial metadata (e.g. that a keyed call was replayed). */
  onMetadata?: (metadata: grpc.Metadata) => void;
}

/** Call options acting for a tenant's member through an API key, as the gateway would sign them. */
export function callAs(tenantId: string, memberId: string, actorId = 'test-api-key'): { caller: Caller } {
  return { caller: { requestId: crypto.randomUUID(), tenantId, actor: { type: 'api_key', id: actorId, memberId } } };
}

/**
 * The same caller with the member's access levels signed in, as the gateway signs them for a member
 * (services read them with ctx.allows / ctx.level); a domain left out is `none`.
 */
export function withAccess(options: { caller: Caller }, access: AccessLevels): { caller: Caller } {
  const { caller } = options;
  return { caller: { ...caller, requestId: crypto.randomUUID(), actor: { ...caller.actor!, access } } };
}

/** A fresh tenant with a member and an API key: call options acting for it (callAs). */
export function newTenant(): { id: string; memberId: string; call: { caller: Caller } } {
  const id = crypto.randomUUID();
  const memberId = crypto.randomUUID();
  return { id, memberId, call: callAs(id, memberId, crypto.randomUUID()) };
}

/**
 * A Downstream for tests that signs each call's caller like the gateway: the caller of the options
 * (callAs), or an anonymous one (no tenant, no actor: the gateway's unauthenticated routes). Calls
 * that pass metadata go as given (tests of what a service refuses).
 */
export class TestClient extends Downstream {
  override async call<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, opts: TestCallOptions = {}): Promise<Res> {
    return super.call(method, request, signed(method, opts));
  }

  override stream<Req, Res>(
    method: UnaryMethod<Req, Res>,
    request: Req,
    opts: TestCallOptions & { signal?: AbortSignal } = {},
  ): AsyncGenerator<Res, void, undefined> {
    return super.stream(method, request, { ...signed(method, opts), ...(opts.signal ? { signal: opts.signal } : {}) });
  }
}

function signed(
  method: { path: string },
  opts: TestCallOptions,
): { metadata: grpc.Metadata; deadlineMs?: number; onMetadata?: (metadata: grpc.Metadata) => void } {
  const metadata =
    opts.metadata ??
    testSigner.metadata(opts.caller ?? { requestId: crypto.randomUUID() }, callerAudience(method.path));
  return {
    metadata,
    ...(opts.deadlineMs ? { deadlineMs: opts.deadlineMs } : {}),
    ...(opts.onMetadata ? { onMetadata: opts.onMetadata } : {}),
  };
}

/** The error details of a call that must fail. */
export async function failure(p: Promise<unknown>): Promise<ErrorDetails> {
  try {
    await p;
  } catch (err) {
    return decodeStatusDetails(err as grpc.ServiceError);
  }
  assert.fail('expected the call to fail');
}

/** The fields a call's 400 (INVALID_ARGUMENT) names in its violations; fails on any other outcome. */
export async function badFields(p: Promise<unknown>): Promise<string[]> {
  const err = await failure(p);
  assert.equal(
    err.code,
    grpc.status.INVALID_ARGUMENT,
    `expected INVALID_ARGUMENT, got ${grpc.status[err.code]}: ${err.message}`,
  );
  return err.fieldViolations.map((v) => v.field);
}
