import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPool, runMigrations, type Pool } from '@workauto/db';
import { createLogger } from '@workauto/logger';
import { eventually, ManualClock, testDatabase } from '@workauto/testing';
import { JOBS_MIGRATIONS, PeriodicWorker, type PeriodicOptions, type TickContext } from './index.js';

const logger = createLogger('periodic-test', process.env.LOG_LEVEL ?? 'silent');

describe('@workauto/jobs: periodic work', () => {
  let pool: Pool;
  const running: { stop(): Promise<void> }[] = [];
  let n = 0;

  /** Starts a worker as a service would (until stop()); its ticks are recorded with the clock's time. */
  function start(options: {
    name: string;
    replicas: 'every' | 'one';
    everyMs: number;
    clock: ManualClock;
    pool?: Pool;
    leaseMs?: number;
    tick?: (ctx: TickContext) => Promise<void>;
  }) {
    const ticks: Date[] = [];
    const beats: number[] = [];
    const worker = new PeriodicWorker({
      logger,
      ...options,
      tick: async (ctx) => {
        ticks.push(ctx.now);
        await options.tick?.(ctx);
      },
    } as PeriodicOptions);
    const controller = new AbortController();
    const done = worker.run({ signal: controller.signal, graceMs: 1_000, beat: () => beats.push(Date.now()) });
    const handle = {
      worker,
      ticks,
      beats,
      stop: async () => {
        controller.abort();
        await done;
      },
    };
    running.push(handle);
    return handle;
  }
  const row = async (name: string) =>
    (await pool.query(`SELECT state, next_attempt_at, lease_owner FROM jobs WHERE queue = $1`, [`periodic:${name}`]))
      .rows[0] as { state: string; next_attempt_at: Date; lease_owner: string | null };

  before(async () => {
    pool = createPool(await testDatabase('periodic'));
    await runMigrations(pool, [JOBS_MIGRATIONS]);
  });
  after(async () => {
    await Promise.all(running.map((r) => r.stop()));
    await pool.end();
  });

  it('every replica: each ticks when it starts and once per interval of its clock', async () => {
    const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
    const a = start({ name: `every${++n}`, replicas: 'every', everyMs: 1_000, clock });
    const b = start({ name: `every${n}`, replicas: 'every', everyMs: 1_000, clock });
    await eventually('both wait after their first tick', () => clock.sleeping === 2);
    assert.equal(a.ticks.length + b.ticks.length, 2);
    await clock.advance(500);
    assert.equal(a.ticks.length + b.ticks.length, 2, 'not before the interval');
    for (let i = 0; i < 3; i++) await clock.advance(700);
    assert.deepEqual(
      a.ticks.map((t) => t.toISOString()),
      ['2030-01-01T00:00:00.000Z', '2030-01-01T00:00:01.200Z', '2030-01-01T00:00:02.600Z'],
    );
    assert.equal(b.ticks.length, 3);
    a.worker.wake();
    await eventually('a woken worker ticks at once', () => a.ticks.length === 4);
    await a.stop();
    await b.stop();
  });

  it('one replica at a time: one tick per interval across replicas, taken over when the holder vanished', async () => {
    const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
    const name = `one${++n}`;
    const options = { name, replicas: 'one', pool, everyMs: 1_000, clock, leaseMs: 600 } as const;
    const a = start(options);
    await eventually('the first replica waits', () => clock.sleeping === 1);
    const b = start(options);
    await eventually('both wait', () => clock.sleeping === 2);
    const all = () => [...a.ticks, ...b.ticks];
    assert.equal(all().length, 2, 'a replica starting makes the work due at once');
    for (let i = 0; i < 5; i++) await clock.advance(1_100);
    assert.equal(all().length, 7, 'one tick per interval, whichever replica runs it');
    assert.deepEqual((await row(name)).state, 'queued');

    // A holder that vanished mid-tick: its lease expires and another replica takes the work over.
    await pool.query(
      `UPDATE jobs SET state = 'running', lease_owner = 'gone', lease_expires_at = now() + interval '1 hour'
        WHERE queue = $1`,
      [`periodic:${name}`],
    );
    await clock.advance(1_100);
    assert.equal(all().length, 7, 'not while the lease holds');
    // The lease runs on the database's time: its end is moved there, not waited for.
    await pool.query(`UPDATE jobs SET lease_expires_at = now() - interval '1 millisecond' WHERE queue = $1`, [
      `periodic:${name}`,
    ]);
    await clock.advance(1_100);
    assert.equal(all().length, 8);
    assert.equal((await row(name)).lease_owner, null);
    await a.stop();
    await b.stop();
  });

  it('one replica at a time: a tick that fails is logged and the loop goes on; woken, it ticks now; a shutdown mid-tick leaves it due at once', async () => {
    const clock = new ManualClock(new Date('2030-01-01T00:00:00Z'));
    const name = `one${++n}`;
    let fail = true;
    let release: (() => void) | undefined;
    const w = start({
      name,
      replicas: 'one',
      pool,
      everyMs: 1_000,
      clock,
      tick: async (ctx) => {
        if (fail) {
          fail = false;
          throw new Error('the database went away');
        }
        // The second tick waits for shutdown.
        await new Promise<void>((resolve) => {
          release = resolve;
          ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
      },
    });
    await eventually('the first tick failed and the worker waits', () => clock.sleeping === 1);
    w.worker.wake(); // before its next tick is due: woken, it ticks now
    await eventually('the second tick runs', () => release !== undefined);
    assert.equal(w.ticks.length, 2);
    assert.equal((await row(name)).state, 'running');
    await w.stop();
    const after = await row(name);
    assert.equal(after.state, 'queued', 'released on shutdown');
    assert.ok(after.next_attempt_at.getTime() <= clock.now().getTime(), 'due at once for another replica');
  });
});
