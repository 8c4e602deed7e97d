import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { AppStatus } from '@workauto/protos/workauto/apps/v1/apps.js';
import { eventually } from '@workauto/testing';
import { claimDueProbes, releaseProbeLease } from './repo/apps.js';
import { S, startApps, tenant, type Apps } from './test-support.js';
import { downUrl, startMcpServer, type McpTestServer } from './testing/mcp-servers.js';

const INTERVAL_MS = 60_000;
const STEP_MS = 1_000;
const LEASE_MS = 30_000;
const APPS = 20;

/**
 * The schedule's claim, run against the database with a clock the test moves (a day ahead of the
 * real one, where the service's own loop, an hour per probe, never looks): what it decides does
 * not depend on how fast the machine is.
 */
describe('the probe schedule', () => {
  let apps: Apps;
  const replicas: pg.Pool[] = [];
  before(async () => {
    apps = await startApps();
    // Two replicas' connections to the same database.
    for (let i = 0; i < 2; i++) replicas.push(new pg.Pool({ connectionString: apps.databaseUrl, max: 1 }));
  });
  after(async () => {
    for (const r of replicas) await r.end();
    await apps.stop();
  });

  it('claims each of 20 apps once per interval across two replicas, at slots spread over the interval', async () => {
    const t = tenant();
    const url = await downUrl();
    for (let i = 0; i < APPS; i++)
      await apps.client.call(S.createApp, { slug: `app-${i}`, display_name: `App ${i}`, mcp_server_url: url }, t.call);
    // The first probe of each (at create) is over: the service's loop leaves them alone for an hour.
    await eventually('every app probed once', async () => {
      const { data } = await apps.client.call(S.listApps, { limit: 50 }, t.call);
      return data.every((a) => a.status !== AppStatus.APP_STATUS_PENDING);
    });
    await eventually(
      'no probe lease held',
      async () => (await apps.db.query('SELECT 1 FROM apps WHERE probe_lease_until IS NOT NULL')).rowCount === 0,
    );

    const start = Date.now() + 86_400_000;
    const claims = new Map<string, { at: number; next: number }[]>();
    for (let at = start; at < start + 3 * INTERVAL_MS; at += STEP_MS) {
      // Both replicas claim at the same instant; each claimed probe ends at once (its lease released).
      const [a, b] = await Promise.all(replicas.map((r) => claimDueProbes(r, 50, INTERVAL_MS, LEASE_MS, new Date(at))));
      const claimed = [...a!, ...b!].map((d) => d.id);
      assert.equal(new Set(claimed).size, claimed.length, `an app claimed by both replicas at +${at - start} ms`);
      if (!claimed.length) continue;
      const { rows } = await apps.db.query<{ id: string; next: Date }>(
        'SELECT id, next_probe_at AS next FROM apps WHERE id = ANY($1)',
        [claimed],
      );
      for (const r of rows) claims.set(r.id, [...(claims.get(r.id) ?? []), { at, next: r.next.getTime() }]);
      for (const id of claimed) await releaseProbeLease(apps.db, id);
    }

    assert.equal(claims.size, APPS, 'every app was claimed');
    for (const [id, list] of claims) {
      assert.equal(list[0]!.at, start, `app ${id} was due at once`);
      for (const c of list) {
        const ahead = c.next - c.at;
        assert.ok(ahead > 0 && ahead <= INTERVAL_MS, `app ${id}: next slot ${ahead} ms after the claim`);
      }
      for (let i = 1; i < list.length; i++) {
        // Claimed at the first step at or after its slot, and each slot one interval after the last.
        assert.ok(
          list[i]!.at >= list[i - 1]!.next && list[i]!.at < list[i - 1]!.next + STEP_MS,
          `app ${id} claimed at its slot`,
        );
        assert.ok(Math.abs(list[i]!.next - list[i - 1]!.next - INTERVAL_MS) <= 1, `app ${id}: slots an interval apart`);
      }
      // Three intervals after the first claim hold three slots; the last may fall past the end.
      assert.ok(list.length === 3 || list.length === 4, `app ${id} claimed ${list.length} times in 3 intervals`);
    }
    // Spread: the apps' slots do not all fall in one instant of the interval.
    const phases = [...claims.values()].map((list) => list[0]!.next % INTERVAL_MS).sort((x, y) => x - y);
    assert.ok(phases.at(-1)! - phases[0]! > INTERVAL_MS / 3, `slots spread over the interval (${phases.join(', ')})`);
  });
});

describe('scheduled probes', () => {
  let first: Apps;
  let second: Apps;
  let server: McpTestServer;
  before(async () => {
    server = await startMcpServer({ transport: 'streamable', tools: [{ name: 'a' }] });
    first = await startApps({ probeIntervalMs: 1_000 });
    // The deployment shape: a second replica on the same database.
    second = await startApps({
      probeIntervalMs: 1_000,
      databaseUrl: first.databaseUrl,
      encryptionKeys: first.encryptionKeys,
    });
  });
  after(async () => {
    await second.stop();
    await first.stop();
    await server.close();
  });

  it('are run by the replicas’ loops again and again', async () => {
    const t = tenant();
    for (let i = 0; i < 4; i++) {
      const via = i % 2 ? first : second;
      await via.client.call(
        S.createApp,
        { slug: `app-${i}`, display_name: `App ${i}`, mcp_server_url: `${server.url}?app=${i}` },
        t.call,
      );
    }
    const probes = (app: number) => server.initializeLog.filter((p) => p.url.endsWith(`?app=${app}`)).length;
    await eventually('every app probed three times', () => [0, 1, 2, 3].every((i) => probes(i) >= 3), 30_000);
  });
});
