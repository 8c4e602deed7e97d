/**
 * The start-up wait for a dependency (untilAvailable) on an injected clock: its backoff, its
 * deadline and what it logs, without waiting for the wall clock.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { createLogger, setLogTarget, tapLogs } from '@workauto/logger';
import { InstantClock } from '@workauto/retry/testing';
import { untilAvailable } from './database.js';
import { DependencyUnavailableError } from './dependency-error.js';

// Lines go nowhere but to the tap (a sink that takes each at once, so none is left queued).
setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

const what = { dependency: 'database', where: 'db:5432/app', hint: 'check DATABASE_URL' };
const refused = () => Promise.reject(new Error('connect ECONNREFUSED'));

async function logged(run: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  const stop = tapLogs((line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  try {
    await run();
    await turn(); // the lines written last reach the tap
  } finally {
    stop();
  }
  return lines;
}

describe('untilAvailable', () => {
  it('waits 250 ms doubling, logs each wait, and says how long it waited once the dependency answers', async () => {
    let tries = 0;
    const step = () => (++tries < 4 ? refused() : Promise.resolve('up'));
    let result: unknown;
    const lines = await logged(async () => {
      result = await untilAvailable(what, createLogger('wait-test', 'info'), step, () => true, {
        clock: new InstantClock(),
      });
    });
    assert.equal(result, 'up');
    assert.deepEqual(
      lines.map((l) => [l.retry_in_ms, l.waited_ms]),
      [
        [250, undefined],
        [500, undefined],
        [1_000, undefined],
        [undefined, 1_750],
      ],
    );
    assert.match(String(lines[3]!.msg), /database reachable; starting/);
  });

  it('gives up at its deadline, its last wait cut to end there, naming the dependency and the last error', async () => {
    let tries = 0;
    const step = () => (tries++, refused());
    let thrown: unknown;
    const lines = await logged(() =>
      untilAvailable(what, createLogger('wait-test', 'info'), step, () => true, {
        clock: new InstantClock(),
        timeoutMs: 1_000,
      }).catch((err: unknown) => (thrown = err)),
    );
    assert.ok(thrown instanceof DependencyUnavailableError);
    assert.equal(thrown.waitedMs, 1_000);
    assert.match(thrown.message, /the database \(db:5432\/app\) did not become available within 1 s .*ECONNREFUSED/);
    assert.deepEqual(
      lines.map((l) => l.retry_in_ms),
      [250, 500, 250],
    );
    assert.equal(tries, 4);
  });

  it('throws at once an error that is not transient', async () => {
    const fatal = new Error('password authentication failed');
    await assert.rejects(
      untilAvailable(
        what,
        createLogger('wait-test', 'silent'),
        () => Promise.reject(fatal),
        (e) => e !== fatal,
        {
          clock: new InstantClock(),
        },
      ),
      fatal,
    );
  });
});
