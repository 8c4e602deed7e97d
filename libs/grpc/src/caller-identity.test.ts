/**
 * A service builds its call context only from a caller token signed by a key it trusts: tested over
 * real gRPC against a GrpcServer whose one handler answers with the context it was given.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPrivateKey } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { createSigner } from 'fast-jwt';
import { createLogger } from '@workauto/logger';
import { NotesTasksServiceService as S } from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import {
  CALLER_TOKEN_KEY,
  CallerSigner,
  CallerVerifier,
  callerAudience,
  generateCallerKeys,
  type Caller,
} from './caller-identity.js';
import { Downstream } from './client.js';
import type { CallContext } from './context.js';
import { decodeStatusDetails, type ErrorDetails } from './errors.js';
import { GrpcServer, type Handlers } from './server.js';

const NOTES = callerAudience(S.listNotes.path);
const keys = generateCallerKeys('gateway-1');
const caller: Caller = {
  requestId: 'req-1',
  tenantId: 'tenant-a',
  actor: { type: 'api_key', id: 'key-1', memberId: 'member-1' },
  clientIp: '10.0.0.9',
  userAgent: 'curl/8',
  idempotencyKey: 'idem-1',
};

/** A notes-tasks server whose ListNotes answers with the caller it saw (JSON in next_cursor). */
async function startServer(opts: { reflection?: boolean; verifyKeys?: string; signingKey?: string } = {}) {
  let seen: CallContext | undefined;
  const handlers = {
    listNotes: async (_req: unknown, ctx: CallContext) => {
      seen = ctx;
      return {
        data: [],
        has_more: false,
        next_cursor: JSON.stringify({
          tenant: ctx.tenant,
          actor: ctx.actor,
          requestId: ctx.requestId,
          ip: ctx.clientIp,
          ua: ctx.userAgent,
          idem: ctx.idempotencyKey,
        }),
      };
    },
  } as unknown as Handlers<typeof S>;
  const server = new GrpcServer({
    name: 'notes-tasks',
    errorDomain: 'notes.workauto',
    logger: createLogger('test', 'silent'),
    protoFiles: ['workauto/notes_tasks/v1/notes_tasks.proto'],
    callerVerifier: new CallerVerifier(opts.verifyKeys ?? keys.verifyKeys),
    callerSigner: opts.signingKey ? new CallerSigner(opts.signingKey, { issuer: 'notes-tasks' }) : undefined,
    reflection: opts.reflection,
  }).add('workauto.notes_tasks.v1.NotesTasksService', S, handlers);
  const port = await server.listen('127.0.0.1', 0);
  server.markServing();
  const client = new Downstream('notes_tasks', `127.0.0.1:${port}`, { volumeThreshold: 100_000 });
  return {
    port,
    client,
    seen: () => seen,
    list: (metadata?: grpc.Metadata) => client.call(S.listNotes, {}, metadata ? { metadata } : {}),
    async stop() {
      client.close();
      await server.shutdown(100);
    },
  };
}

async function failure(p: Promise<unknown>): Promise<ErrorDetails> {
  try {
    await p;
  } catch (err) {
    return decodeStatusDetails(err as grpc.ServiceError);
  }
  assert.fail('expected the call to fail');
}

const withToken = (token: string) => {
  const md = new grpc.Metadata();
  md.set(CALLER_TOKEN_KEY, token);
  return md;
};

describe('signed caller identity', () => {
  let svc: Awaited<ReturnType<typeof startServer>>;
  let gateway: CallerSigner;
  before(async () => {
    svc = await startServer();
    gateway = new CallerSigner(keys.signingKey, { issuer: 'gateway' });
  });
  after(() => svc.stop());

  async function refused(metadata: grpc.Metadata | undefined, message: RegExp) {
    const err = await failure(svc.list(metadata));
    assert.equal(err.code, grpc.status.UNAUTHENTICATED, `got ${grpc.status[err.code]}: ${err.message}`);
    assert.equal(err.reason, 'CALLER_IDENTITY_INVALID');
    assert.match(err.message, message);
  }

  it('builds the call context from a valid token: tenant, actor, request id, client, idempotency key', async () => {
    const res = await svc.list(gateway.metadata(caller, NOTES));
    assert.deepEqual(JSON.parse(res.next_cursor!), {
      tenant: 'tenant-a',
      actor: { type: 'api_key', id: 'key-1', memberId: 'member-1' },
      requestId: 'req-1',
      ip: '10.0.0.9',
      ua: 'curl/8',
      idem: 'idem-1',
    });
  });

  it('accepts a token without a tenant (platform admin, unauthenticated routes); tenant-scoped work is still refused', async () => {
    const err = await failure(svc.list(gateway.metadata({ requestId: 'r2' }, NOTES)));
    assert.equal(err.reason, 'TENANT_REQUIRED');
    assert.equal(svc.seen()?.requestId, 'r2');
    assert.equal(svc.seen()?.tenantId, undefined);
  });

  it('refuses a call without a token, and one with loose x-tenant-id / x-actor-* metadata only', async () => {
    await refused(undefined, /carries no caller identity.*CALLER_VERIFY_KEYS/);
    const loose = new grpc.Metadata();
    loose.set('x-tenant-id', 'tenant-a');
    loose.set('x-actor-type', 'platform_admin');
    loose.set('x-actor-id', 'platform');
    await refused(loose, /carries no caller identity/);
  });

  it('refuses an expired token', async () => {
    const stale = new CallerSigner(keys.signingKey, { issuer: 'gateway', ttlSeconds: -60 });
    await refused(stale.metadata(caller, NOTES), /expired/);
  });

  it('refuses a token signed by a key it does not trust: unknown kid, or a known kid with another key', async () => {
    const stranger = new CallerSigner(generateCallerKeys('attacker').signingKey, { issuer: 'gateway' });
    await refused(stranger.metadata(caller, NOTES), /not in this service's CALLER_VERIFY_KEYS/);
    const impostor = new CallerSigner(generateCallerKeys('gateway-1').signingKey, { issuer: 'gateway' });
    await refused(impostor.metadata(caller, NOTES), /signature does not verify/);
  });

  it('refuses a tampered token (another tenant written into a valid one, even one it verified before)', async () => {
    const valid = gateway.metadata(caller, NOTES);
    await svc.list(valid);
    const [header, payload, signature] = String(valid.get(CALLER_TOKEN_KEY)[0]).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, tenant_id: 'tenant-b' })).toString('base64url');
    const md = valid.clone();
    md.set(CALLER_TOKEN_KEY, `${header}.${forged}.${signature}`);
    await refused(md, /signature does not verify/);
  });

  it('refuses an unsigned token (alg none) and garbage', async () => {
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'caller+jwt', kid: 'gateway-1' })).toString(
      'base64url',
    );
    const body = Buffer.from(
      JSON.stringify({
        request_id: 'r',
        tenant_id: 'tenant-a',
        aud: NOTES,
        exp: Date.now() / 1000 + 60,
        iat: Date.now() / 1000,
      }),
    ).toString('base64url');
    await refused(withToken(`${none}.${body}.`), /not valid|not allowed/);
    await refused(withToken('not-a-jwt'), /not a JWT/);
  });

  it('refuses a JWT of another type (typ JWT) even when a trusted key signed it', async () => {
    const pem = createPrivateKey({ key: JSON.parse(keys.signingKey), format: 'jwk' }).export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    const now = Math.floor(Date.now() / 1000);
    const plain = createSigner({ key: pem, algorithm: 'EdDSA', kid: 'gateway-1' })({
      aud: NOTES,
      iat: now,
      exp: now + 30,
      request_id: 'r',
      tenant_id: 'tenant-a',
    });
    await refused(withToken(plain), /FAST_JWT_INVALID_TYPE/);
  });

  it("carries the member's access levels, and a service's context answers allows() from them", async () => {
    const member: Caller = {
      ...caller,
      actor: { type: 'member', id: 'member-2', memberId: 'member-2', access: { notes: 'write', crm: 'none' } },
    };
    await svc.list(gateway.metadata(member, NOTES));
    const ctx = svc.seen()!;
    assert.deepEqual(ctx.actor?.access, { notes: 'write', crm: 'none' });
    assert.deepEqual(
      [
        ctx.allows('notes', 'write'),
        ctx.allows('notes', 'admin'),
        ctx.allows('crm', 'read'),
        ctx.allows('tasks', 'read'),
      ],
      [true, false, false, false],
      'a level below the need, or a domain left out, is refused',
    );
    assert.equal(ctx.level('tasks'), 'none');
    await svc.list(gateway.metadata({ ...caller, actor: { type: 'system', id: 'run-1' } }, NOTES));
    assert.equal(svc.seen()!.allows('crm', 'admin'), true, 'a caller that is no member is not restricted here');
  });

  it('refuses a signed token whose access claim is not {domain: level}', async () => {
    const pem = createPrivateKey({ key: JSON.parse(keys.signingKey), format: 'jwk' }).export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    const sign = createSigner({
      key: pem,
      algorithm: 'EdDSA',
      kid: 'gateway-1',
      header: { alg: 'EdDSA', typ: 'caller+jwt' },
    });
    const now = Math.floor(Date.now() / 1000);
    for (const access of [{ notes: 'owner' }, { payroll: 'read' }, ['notes'], 'admin']) {
      const token = sign({
        aud: NOTES,
        iat: now,
        exp: now + 30,
        tenant_id: 'tenant-a',
        actor: { type: 'member', id: 'm', access },
      });
      await refused(withToken(token), /claims are malformed/);
    }
  });

  it('refuses a token signed for another service (no replay from one service to the next)', async () => {
    await refused(
      gateway.metadata(caller, 'workauto.identity.v1.IdentityService'),
      /not for this service \(workauto\.notes_tasks\.v1\.NotesTasksService\)/,
    );
  });

  it("reuses one token per principal and target service; the request's fields travel beside it", async () => {
    const signer = new CallerSigner(keys.signingKey, { issuer: 'gateway' });
    const first = signer.metadata(caller, NOTES);
    const second = signer.metadata(
      { ...caller, requestId: 'req-2', clientIp: '10.0.0.10', userAgent: 'Mözilla/5 ✓', idempotencyKey: undefined },
      NOTES,
    );
    assert.equal(
      second.get(CALLER_TOKEN_KEY)[0],
      first.get(CALLER_TOKEN_KEY)[0],
      'the same principal reuses its token',
    );
    for (const other of [
      { ...caller, tenantId: 'tenant-b' },
      { ...caller, actor: { type: 'member', id: 'key-1' } },
      { ...caller, actor: { ...caller.actor!, memberId: 'member-2' } },
    ]) {
      assert.notEqual(
        signer.sign(other, NOTES),
        signer.sign(caller, NOTES),
        `another principal gets another token: ${JSON.stringify(other)}`,
      );
    }
    assert.notEqual(
      signer.sign(caller, 'workauto.identity.v1.IdentityService'),
      signer.sign(caller, NOTES),
      'another audience gets another token',
    );
    const claims = JSON.parse(Buffer.from(signer.sign(caller, NOTES).split('.')[1]!, 'base64url').toString());
    assert.deepEqual(
      Object.keys(claims).sort(),
      ['actor', 'aud', 'exp', 'iat', 'iss', 'tenant_id'],
      'only the principal is signed',
    );
    // The second call's own fields reach the handler, not the first's.
    const res = await svc.list(second);
    assert.deepEqual(JSON.parse(res.next_cursor!), {
      tenant: 'tenant-a',
      actor: { type: 'api_key', id: 'key-1', memberId: 'member-1' },
      requestId: 'req-2',
      ip: '10.0.0.10',
      ua: 'Mözilla/5 ✓',
    });
  });

  it('signs a frozen actor (serialized once) as it signs the same actor unfrozen: per tenant and audience', () => {
    const signer = new CallerSigner(keys.signingKey, { issuer: 'gateway' });
    const frozen = Object.freeze({
      type: 'member',
      id: 'key-1',
      memberId: 'member-1',
      access: Object.freeze({ notes: 'write' as const }),
    });
    const claimsOf = (token: string) =>
      JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const IDENTITY = 'workauto.identity.v1.IdentityService';
    for (const [tenantId, audience] of [
      ['tenant-a', NOTES],
      ['tenant-b', NOTES],
      ['tenant-a', IDENTITY],
    ] as const) {
      const token = signer.sign({ requestId: 'req-1', tenantId, actor: frozen }, audience);
      assert.equal(signer.sign({ requestId: 'req-2', tenantId, actor: frozen }, audience), token, 'reused');
      assert.equal(
        signer.sign({ requestId: 'req-3', tenantId, actor: { ...frozen } }, audience),
        token,
        'the same principal unfrozen gets the same token',
      );
      const claims = claimsOf(token);
      assert.deepEqual(
        [claims.tenant_id, claims.aud, claims.actor],
        [tenantId, audience, { type: 'member', id: 'key-1', member_id: 'member-1', access: { notes: 'write' } }],
      );
    }
    // An actor that can change is read on every call.
    const open = { type: 'member', id: 'key-1', memberId: 'member-1' };
    const before = signer.sign({ requestId: 'req-1', tenantId: 'tenant-a', actor: open }, NOTES);
    open.memberId = 'member-2';
    const after = signer.sign({ requestId: 'req-2', tenantId: 'tenant-a', actor: open }, NOTES);
    assert.notEqual(after, before);
    assert.equal((claimsOf(after).actor as { member_id: string }).member_id, 'member-2');
  });

  it('renews a token after half its life, so a service never gets one about to expire', (t) => {
    // On a whole second: tokens carry whole seconds, so half of a 2 s life ends 1 s from here.
    t.mock.timers.enable({ apis: ['Date'], now: Math.floor(Date.now() / 1000) * 1000 });
    const short = new CallerSigner(keys.signingKey, { issuer: 'gateway', ttlSeconds: 2 });
    const first = short.sign(caller, NOTES);
    t.mock.timers.tick(900);
    assert.equal(short.sign(caller, NOTES), first, 'kept before half its life');
    t.mock.timers.tick(200);
    assert.notEqual(short.sign(caller, NOTES), first);
  });

  it('refuses a call whose token verifies but that carries no request id beside it', async () => {
    await refused(withToken(gateway.sign(caller, NOTES)), /no request id/);
  });

  it('checks a token it verified before again for audience and expiry', (t) => {
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
    const verifier = new CallerVerifier(keys.verifyKeys);
    const md = gateway.metadata(caller, NOTES);
    assert.equal(verifier.verify(md, NOTES).tenantId, 'tenant-a');
    assert.throws(() => verifier.verify(md, 'workauto.identity.v1.IdentityService'), /not for this service/);
    // Expired 3 s ago: still inside the 5 s clock tolerance, then past it (the cached entry too).
    const dying = new CallerSigner(keys.signingKey, { issuer: 'gateway', ttlSeconds: -3 }).metadata(caller, NOTES);
    assert.equal(verifier.verify(dying, NOTES).tenantId, 'tenant-a');
    t.mock.timers.tick(2_200);
    assert.throws(() => verifier.verify(dying, NOTES), /expired/);
  });

  it('keeps at most maxCachedTokens verified tokens and still verifies the evicted ones', () => {
    const verifier = new CallerVerifier(keys.verifyKeys, { maxCachedTokens: 2 });
    const tenants = ['t1', 't2', 't3'].map((t) => gateway.metadata({ ...caller, tenantId: t }, NOTES));
    for (const md of [...tenants, ...tenants]) assert.ok(verifier.verify(md, NOTES).tenantId);
    const tampered = gateway
      .sign({ ...caller, tenantId: 't1' }, NOTES)
      .replace(
        /\.[^.]+\./,
        `.${Buffer.from(JSON.stringify({ aud: NOTES, tenant_id: 't9', iat: 1, exp: 4e9 })).toString('base64url')}.`,
      );
    const md = withToken(tampered);
    md.set('x-request-id-bin', Buffer.from('r'));
    assert.throws(() => verifier.verify(md, NOTES), /signature does not verify/);
  });

  it('verifies with any key of the set (rotation: old and new kid side by side)', async () => {
    const next = generateCallerKeys('gateway-2');
    const both = JSON.stringify({ keys: [...JSON.parse(keys.verifyKeys).keys, ...JSON.parse(next.verifyKeys).keys] });
    const rotating = await startServer({ verifyKeys: both });
    try {
      await rotating.list(gateway.metadata(caller, NOTES));
      await rotating.list(new CallerSigner(next.signingKey, { issuer: 'gateway' }).metadata(caller, NOTES));
    } finally {
      await rotating.stop();
    }
  });

  it('leaves health checks unauthenticated', async () => {
    assert.equal(await svc.client.checkHealth(), 'serving');
  });
});

describe("calls a service makes on a caller's behalf", () => {
  it("are signed with the service's own key for the target service, with the same caller", async () => {
    const own = generateCallerKeys('notes-tasks-1');
    const svc = await startServer({ signingKey: own.signingKey });
    try {
      await svc.list(new CallerSigner(keys.signingKey, { issuer: 'gateway' }).metadata(caller, NOTES));
      const identity = 'workauto.identity.v1.IdentityService';
      const onward = svc.seen()!.toMetadata(identity);
      // The Idempotency-Key names the client's request, not the calls made for it.
      assert.deepEqual(new CallerVerifier(own.verifyKeys).verify(onward, identity), {
        ...caller,
        idempotencyKey: undefined,
        idempotencySeal: undefined,
      });
    } finally {
      await svc.stop();
    }
  });

  it('are refused with a message that says to set CALLER_SIGNING_KEY when the service has none', async () => {
    const svc = await startServer();
    try {
      await svc.list(new CallerSigner(keys.signingKey, { issuer: 'gateway' }).metadata(caller, NOTES));
      assert.throws(() => svc.seen()!.toMetadata('workauto.identity.v1.IdentityService'), /CALLER_SIGNING_KEY/);
    } finally {
      await svc.stop();
    }
  });
});

describe('caller keys configuration', () => {
  it('refuses verify keys that are missing, not a JWKS, without kids, or private', () => {
    assert.throws(() => new CallerVerifier(''), /CALLER_VERIFY_KEYS/);
    assert.throws(() => new CallerVerifier('{"keys": []}'), /at least one key/);
    const pub = JSON.parse(keys.verifyKeys).keys[0];
    assert.throws(() => new CallerVerifier(JSON.stringify({ keys: [{ ...pub, kid: undefined }] })), /kid/);
    assert.throws(() => new CallerVerifier(JSON.stringify({ keys: [JSON.parse(keys.signingKey)] })), /private key/);
  });

  it('refuses a signing key that is not a private JWK with a kid', () => {
    assert.throws(() => new CallerSigner('nope', { issuer: 'gateway' }), /CALLER_SIGNING_KEY/);
    assert.throws(
      () => new CallerSigner(JSON.stringify(JSON.parse(keys.verifyKeys).keys[0]), { issuer: 'gateway' }),
      /private JWK/,
    );
    assert.throws(
      () => new CallerSigner(JSON.stringify({ ...JSON.parse(keys.signingKey), kid: undefined }), { issuer: 'gateway' }),
      /kid/,
    );
  });
});

describe('gRPC reflection', () => {
  /** Asks the reflection service to list services; resolves to the gRPC status it ends with. */
  function askReflection(port: number): Promise<grpc.status> {
    const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    return new Promise((resolve) => {
      const call = client.makeBidiStreamRequest(
        '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
        (b: Buffer) => b,
        (b: Buffer) => b,
      );
      call.on('data', () => undefined);
      call.on('status', (s: grpc.StatusObject) => {
        client.close();
        resolve(s.code);
      });
      call.on('error', () => undefined);
      call.write(Buffer.from([0x3a, 0x00])); // list_services: ""
      call.end();
    });
  }

  it('is off by default and on with reflection: true', async () => {
    const off = await startServer();
    const on = await startServer({ reflection: true });
    try {
      assert.equal(await askReflection(off.port), grpc.status.UNIMPLEMENTED);
      assert.equal(await askReflection(on.port), grpc.status.OK);
    } finally {
      await off.stop();
      await on.stop();
    }
  });
});
