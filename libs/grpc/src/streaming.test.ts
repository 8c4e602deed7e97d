/**
 * Server-streaming rpcs through the kit: GrpcServer runs a handler that yields its messages and
 * Downstream.stream reads them, over real gRPC on loopback.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createLogger } from '@workauto/logger';
import { eventually } from '@workauto/retry/testing';
import { CallerSigner, CallerVerifier, callerAudience, generateCallerKeys } from './caller-identity.js';
import { Downstream } from './client.js';
import type { CallContext } from './context.js';
import { DomainError, decodeStatusDetails, errors } from './errors.js';
import { GrpcServer } from './server.js';

const keys = generateCallerKeys('gateway');
const signer = new CallerSigner(keys.signingKey, { issuer: 'gateway' });

const method = <Streaming extends boolean>(name: string, responseStream: Streaming) => ({
  path: `/test.Feeds/${name}`,
  requestStream: false as const,
  responseStream,
  requestSerialize: (b: Buffer) => b,
  requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b,
  responseDeserialize: (b: Buffer) => b,
});
const Feeds = { Feed: method('Feed', true), Echo: method('Echo', false) };

describe('server-streaming rpcs', () => {
  let server: GrpcServer;
  let client: Downstream;
  /** Resolves with the handler's context when a stream's handler stops (its finally ran). */
  let stopped: PromiseWithResolvers<CallContext>;
  /** Messages the 'paced' handler was asked for. */
  let yielded = 0;

  before(async () => {
    server = new GrpcServer({
      name: 'feeds',
      errorDomain: 'feeds.workauto',
      logger: createLogger('test', 'silent'),
      protoFiles: [],
      callerVerifier: new CallerVerifier(keys.verifyKeys),
    }).add('test.Feeds', Feeds, {
      async *Feed(req: Buffer, ctx: CallContext) {
        try {
          const kind = req.toString();
          if (kind === 'missing') throw errors.notFound('feed', 'f1');
          if (kind === 'bug') throw new Error('password=hunter2');
          yield Buffer.from(`tenant ${ctx.tenant}`);
          if (kind === 'fails-later') throw errors.failedPrecondition('FEED_BROKEN', 'the feed broke; try again');
          if (kind === 'paced')
            for (;;) {
              yielded++;
              yield Buffer.alloc(64 * 1024, 7);
            }
          for (let i = 0; kind === 'endless' || i < 3; i++) yield Buffer.alloc(16 * 1024, i % 256);
        } finally {
          stopped.resolve(ctx);
        }
      },
      Echo: async (req: Buffer) => req,
    });
    const port = await server.listen('127.0.0.1', 0);
    server.markServing();
    client = new Downstream('feeds', `127.0.0.1:${port}`, { deadlineMs: 30_000 });
  });
  after(async () => {
    client.close();
    await server.shutdown(100);
  });

  const open = (kind: string, signal?: AbortSignal) => {
    stopped = Promise.withResolvers();
    return client.stream(Feeds.Feed, Buffer.from(kind), {
      metadata: signer.metadata(
        { requestId: 'r1', tenantId: 't1', actor: { type: 'member', id: 'm1' } },
        callerAudience(Feeds.Feed.path),
      ),
      ...(signal ? { signal } : {}),
    });
  };
  const failureOf = async (messages: AsyncIterable<Buffer>) => {
    const got: string[] = [];
    try {
      for await (const m of messages) got.push(m.toString().slice(0, 9));
    } catch (err) {
      return { got, err: decodeStatusDetails(err as grpc.ServiceError) };
    }
    return assert.fail(`the stream ended without an error after ${got.length} messages`);
  };

  it('sends every message the handler yields, in order, then ends the call', async () => {
    const got: Buffer[] = [];
    for await (const m of open('three')) got.push(m);
    assert.equal(got[0]!.toString(), 'tenant t1', 'the handler ran with the verified caller');
    assert.deepEqual(
      got.slice(1).map((b) => [b.length, b[0]]),
      [
        [16_384, 0],
        [16_384, 1],
        [16_384, 2],
      ],
    );
  });

  it('ends with the typed error a handler throws before its first message, as a unary call would', async () => {
    const { got, err } = await failureOf(open('missing'));
    assert.deepEqual(got, []);
    assert.deepEqual([err.code, err.reason, err.domain], [grpc.status.NOT_FOUND, 'FEED_NOT_FOUND', 'feeds.workauto']);
    const bug = await failureOf(open('bug'));
    assert.equal(bug.err.code, grpc.status.INTERNAL);
    assert.equal(bug.err.message.includes('hunter2'), false, 'an unexpected error keeps its text to the logs');
  });

  it('ends with the mapped error a handler throws after messages went out', async () => {
    const { got, err } = await failureOf(open('fails-later'));
    assert.deepEqual(got, ['tenant t1']);
    assert.deepEqual([err.code, err.reason], [grpc.status.FAILED_PRECONDITION, 'FEED_BROKEN']);
  });

  it('cancels the call when the reader stops early or its signal aborts: the handler stops', async () => {
    let read = 0;
    for await (const _ of open('endless')) if (++read === 5) break;
    const ctx = await stopped.promise;
    assert.equal(ctx.signal.aborted, true, 'the handler saw the cancel');

    const controller = new AbortController();
    const reason = new DomainError(grpc.status.CANCELLED, 'CANCELLED', 'the client went away');
    const messages = open('endless', controller.signal);
    await messages.next();
    controller.abort(reason);
    await assert.rejects(
      (async () => {
        for await (const _ of messages);
      })(),
      (err) => err === reason,
    );
    assert.equal((await stopped.promise).signal.aborted, true);
    assert.equal(
      (
        await client.call(Feeds.Echo, Buffer.from('ping'), {
          metadata: signer.metadata({ requestId: 'r2' }, callerAudience(Feeds.Echo.path)),
        })
      ).toString(),
      'ping',
      'unary rpcs of the same service are served beside streaming ones',
    );
  });

  it('asks the handler for its next message only once the last one went out and the reader is one behind: a reader that stops holds it after a few', async (t) => {
    yielded = 0;
    const messages = open('paced');
    await messages.next(); // the caller identity
    await messages.next();
    // The reader stops here. What the handler was asked for settles: the one the client reads ahead,
    // what HTTP/2's 64 KiB window lets through, and the one being written (before: 16 buffered by
    // the client, and 16 more by the server).
    // No event marks "the server wants no more": settled is the count unchanged over 300 ms.
    let last = -1;
    await eventually(
      () => `the handler stops being asked for messages (asked for ${yielded})`,
      () => {
        const settled = yielded === last;
        last = yielded;
        return settled;
      },
      20_000,
      300,
    );
    t.diagnostic(`the handler was asked for ${yielded} messages of 64 KiB while the reader read 1`);
    assert.ok(yielded <= 6, `the handler was asked for ${yielded} messages of 64 KiB while the reader read 1`);
    await messages.return();
    assert.equal((await stopped.promise).signal.aborted, true, 'the handler saw the cancel');
  });

  it('never runs a handler without a verified caller token', async () => {
    stopped = Promise.withResolvers();
    const { err } = await failureOf(client.stream(Feeds.Feed, Buffer.from('three')));
    assert.equal(err.code, grpc.status.UNAUTHENTICATED);
  });
});
