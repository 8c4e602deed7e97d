import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffDelay, retry, type Clock } from './index.js';
import { eventually, InstantClock } from './testing.js';

/** An attempt that fails `times` times with `error`, then resolves to its attempt number. */
function failing(times: number, error: unknown = new Error('busy')) {
  return async (n: number) => {
    if (n <= times) throw error;
    return n;
  };
}

describe('backoffDelay', () => {
  it('grows by the factor from the first wait up to the cap, and full jitter takes a random part of it', () => {
    const backoff = { firstMs: 250, maxMs: 5_000 };
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map((r) => backoffDelay(backoff, r)),
      [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000],
    );
    assert.deepEqual(
      [1, 2, 3].map((r) => backoffDelay({ firstMs: 1_000, factor: 1 }, r)),
      [1_000, 1_000, 1_000],
    );
    assert.equal(
      backoffDelay({ firstMs: 20, jitter: 'full' }, 3, () => 0.5),
      40,
    );
  });

  it('with a fractional jitter keeps each wait within that fraction of its value, either way', () => {
    const backoff = { firstMs: 1_000, maxMs: 3_600_000, jitter: 0.2 };
    assert.deepEqual(
      [0, 0.5, 1].map((r) => Math.round(backoffDelay(backoff, 3, () => r))),
      [3_200, 4_000, 4_800],
    );
    assert.equal(Math.round(backoffDelay(backoff, 30, () => 1)), 4_320_000, 'the cap, then the jitter');
  });
});

describe('eventually', () => {
  it('answers what the check found once it finds something, and names what it waited for when it never does', async () => {
    let calls = 0;
    assert.deepEqual(await eventually('the third call', () => ++calls >= 3 && { calls }, 5_000, 1), { calls: 3 });
    await assert.rejects(
      eventually(
        () => `a check that never holds (asked ${calls} times)`,
        () => (calls++, null),
        50,
        5,
      ),
      (err: Error) => /^not within 50 ms: a check that never holds \(asked \d+ times\)$/.test(err.message) && calls > 5,
    );
  });

  it('ends the wait at once with an error the check throws', async () => {
    let calls = 0;
    await assert.rejects(
      eventually('a broken check', () => {
        calls++;
        throw new Error('the table does not exist');
      }),
      /the table does not exist/,
    );
    assert.equal(calls, 1);
  });
});

describe('retry', () => {
  it('tries again after each retryable failure, waiting by the backoff, until an attempt succeeds', async () => {
    const clock = new InstantClock();
    const seen: string[] = [];
    const n = await retry(failing(3), {
      backoff: { firstMs: 100 },
      clock,
      onRetry: (f) => void seen.push(`${f.attempt}:${f.elapsedMs}:${f.delayMs}`),
    });
    assert.equal(n, 4);
    assert.deepEqual(clock.waits, [100, 200, 400]);
    assert.deepEqual(seen, ['1:0:100', '2:100:200', '3:300:400']);
  });

  it('throws at once a failure that is not retryable, and the last one when the attempts are used up', async () => {
    const clock = new InstantClock();
    const fatal = new Error('syntax error');
    await assert.rejects(
      retry(failing(5, fatal), { backoff: { firstMs: 10 }, clock, retryable: (e) => e !== fatal }),
      fatal,
    );
    assert.deepEqual(clock.waits, []);
    await assert.rejects(retry(failing(5), { backoff: { firstMs: 10 }, clock, attempts: 3 }), /busy/);
    assert.deepEqual(clock.waits, [10, 20]);
  });

  it('cuts the last wait to the time left and then throws what timedOut makes of the last failure', async () => {
    const clock = new InstantClock();
    await assert.rejects(
      retry(failing(Infinity), {
        backoff: { firstMs: 400, factor: 1 },
        clock,
        timeoutMs: 1_000,
        timedOut: async (last) => new Error(`gave up after ${last.attempt} attempts and ${last.elapsedMs} ms`),
      }),
      /gave up after 4 attempts and 1000 ms/,
    );
    assert.deepEqual(clock.waits, [400, 400, 200]);
  });

  it("ends the wait when its signal aborts and throws the signal's reason; a failure while aborted is thrown as it is", async () => {
    const controller = new AbortController();
    let asleep!: () => void;
    const sleeping = new Promise<void>((resolve) => (asleep = resolve));
    const clock: Clock = {
      now: () => new Date(0),
      sleep: (_ms, signal) =>
        new Promise((resolve) => {
          signal!.addEventListener('abort', () => resolve());
          asleep();
        }),
    };
    const waiting = retry(failing(Infinity), { backoff: { firstMs: 60_000 }, clock, signal: controller.signal });
    await sleeping; // the sentinel: the first failure is waiting out its backoff
    controller.abort(new Error('call cancelled'));
    await assert.rejects(waiting, /call cancelled/);
    await assert.rejects(
      retry(failing(Infinity, new Error('deadlock')), { backoff: { firstMs: 1 }, clock, signal: controller.signal }),
      /deadlock/,
    );
  });
});
