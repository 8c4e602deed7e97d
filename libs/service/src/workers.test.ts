/**
 * The supervisor's restart schedule, on an injected clock (no wall-clock wait): a crashing loop is
 * started again after 1 s, 2 s, 4 s … at most 30 s, and after 1 s again once it ran a good while.
 * (Restarting at all, and liveness while a loop is stuck, are tested with a real service in
 * service.test.ts.)
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { createLogger, setLogTarget, tapLogs } from '@workauto/logger';
import { eventually, InstantClock } from '@workauto/retry/testing';
import { WorkerSupervisor, type Worker } from './workers.js';

// Lines go nowhere but to the tap.
setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

describe('WorkerSupervisor', () => {
  it('restarts a crashed loop after 1 s doubling up to 30 s, and after 1 s again once a run lasted over a minute', async () => {
    const clock = new InstantClock();
    // Runs 1–8 fail at once, run 9 after 61 s on the clock, run 10 at once; run 11 runs until the stop.
    let runs = 0;
    const worker: Worker = {
      name: 'flaky',
      async run({ signal }) {
        runs++;
        if (runs === 9) await clock.sleep(61_000);
        if (runs <= 10) throw new Error(`run ${runs} failed`);
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      },
    };
    const lines: { msg: string; restart_in_ms?: number; err?: { message: string } }[] = [];
    const untap = tapLogs((line) => lines.push(JSON.parse(line) as (typeof lines)[number]));
    const supervisor = new WorkerSupervisor([worker], createLogger('workers-test', 'info'), () => undefined, {
      clock,
    });
    try {
      supervisor.start();
      await eventually('the eleventh run started', () => runs === 11);
      await supervisor.stop();
      await turn(); // the lines written last reach the tap
    } finally {
      untap();
    }
    const restarts = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 1_000, 2_000];
    assert.deepEqual(
      lines.filter((l) => l.msg.startsWith('worker loop crashed')).map((l) => [l.err?.message, l.restart_in_ms]),
      restarts.map((ms, i) => [`run ${i + 1} failed`, ms]),
    );
    assert.deepEqual(
      clock.waits.filter((ms) => ms !== 61_000),
      restarts,
      'waited as long as it logged',
    );
  });
});
