/**
 * A tenant's share of the pool against real PostgreSQL: a checkout over the share waits for the
 * tenant's own connections, never past its caller's deadline, and its failure says "this tenant is
 * busy", not "the database is away" (which would open circuits for every tenant); a streaming
 * handler's reads count against its tenant's share like a unary call's.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it, mock } from 'node:test';
import {
  TenantShareBusyError,
  createPool,
  ensureDatabase,
  isDatabaseUnavailable,
  iterateForTenant,
  runForTenant,
  type Pool,
  type PoolClient,
} from './index.js';

const A = 'tenant-a';
const B = 'tenant-b';

let pool: Pool;
before(async () => {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
  // A pool of 4 of which one tenant may hold 1: the connection timeout (the share's longest wait) is 5 s.
  pool = createPool(await ensureDatabase(server, `t_share_${randomBytes(4).toString('hex')}`), {
    max: 4,
    tenantShare: 1,
  });
});
after(() => pool.end());

/** A connection checked out as tenant's work, held until released. */
const hold = (tenant: string): Promise<PoolClient> => runForTenant(tenant, () => pool.connect());

describe("a tenant's share of the pool", () => {
  it("ends a wait for the share shortly before the caller's deadline, as the tenant's own 429, not as the database being away", async (t) => {
    const held = await hold(A);
    try {
      t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
      const settled: { outcome?: unknown } = {};
      const waiting = runForTenant(A, () => pool.query('SELECT 1'), { deadline: Date.now() + 1_000 }).then(
        () => (settled.outcome = 'answered'),
        (err: unknown) => (settled.outcome = err),
      );
      // The caller's deadline is 1 s away: the wait gives up 250 ms before it, far before the 5 s
      // the pool waits for a free connection.
      t.mock.timers.tick(740);
      await Promise.resolve();
      assert.ok(!('outcome' in settled), 'still waiting for its own connection');
      t.mock.timers.tick(20);
      await waiting;
      const { outcome } = settled;
      assert.ok(outcome instanceof TenantShareBusyError, `failed with ${String(outcome)}`);
      assert.equal(isDatabaseUnavailable(outcome), false, 'never "the database is unavailable"');
      assert.match((outcome as Error).message, /this tenant's requests hold all 1 of the database connections/);
    } finally {
      mock.timers.reset();
      held.release();
    }
  });

  it('refuses at once a call whose deadline leaves no time to wait', async () => {
    const held = await hold(A);
    try {
      await assert.rejects(
        runForTenant(A, () => pool.query('SELECT 1'), { deadline: Date.now() + 100 }),
        TenantShareBusyError,
      );
    } finally {
      held.release();
    }
  });

  it("counts a streaming handler's reads against its tenant's share, and leaves the other tenants theirs", async () => {
    const reads: string[] = [];
    async function* pages(): AsyncGenerator<number> {
      for (let page = 0; page < 3; page++) {
        const { rows } = await pool.query<{ n: number }>('SELECT $1::int AS n', [page]);
        reads.push(`page ${page}`);
        yield rows[0]!.n;
      }
    }
    const held = await hold(A);
    const stream = iterateForTenant(A, pages(), { deadline: Date.now() + 60_000 })[Symbol.asyncIterator]();
    let first: IteratorResult<number> | undefined;
    const reading = stream.next().then((r) => (first = r));
    // Tenant B is served meanwhile; A's stream waits for A's one connection.
    assert.equal((await runForTenant(B, () => pool.query<{ one: number }>('SELECT 1 AS one'))).rows[0]!.one, 1);
    assert.equal(first, undefined, "A's page waits while A holds its share");
    assert.deepEqual(reads, []);
    held.release();
    await reading;
    assert.deepEqual(first, { done: false, value: 0 });
    // The stream holds no connection between its pages: A's next call gets one at once.
    const { rows } = await runForTenant(A, () => pool.query<{ two: number }>('SELECT 2 AS two'), {
      deadline: Date.now() + 200,
    });
    assert.equal(rows[0]!.two, 2);
    assert.deepEqual((await stream.next()).value, 1);
    await stream.return?.();
  });
});
