import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppStatus } from '@workauto/protos/workauto/apps/v1/apps.js';
import { eventually, ManualClock } from '@workauto/testing';
import { S, startApps, tenant, type Apps } from './test-support.js';
import { startMcpServer, type McpTestServer } from './testing/mcp-servers.js';

const INTERVAL_MS = 15_000;
/** Longer than the schedule's turn (1 s and its jitter): each step is one turn of both replicas. */
const STEP_MS = 1_500;
const STEPS_PER_INTERVAL = INTERVAL_MS / STEP_MS;
const APPS = 20;

describe('scheduled probes across two replicas', () => {
  let first: Apps;
  let second: Apps;
  let server: McpTestServer;
  // Ahead of the database's time, so an app created now is due at once.
  const clock = new ManualClock(Date.now() + 60_000);
  before(async () => {
    server = await startMcpServer({ transport: 'streamable', tools: [{ name: 'a' }] });
    first = await startApps({ probeIntervalMs: INTERVAL_MS, clock });
    // The deployment shape: a second replica on the same database.
    second = await startApps({
      probeIntervalMs: INTERVAL_MS,
      databaseUrl: first.databaseUrl,
      encryptionKeys: first.encryptionKeys,
      clock,
    });
    await eventually("both replicas' schedules wait on the clock", () => clock.sleeping === 2);
  });
  after(async () => {
    await second.stop();
    await first.stop();
    await server.close();
  });

  it('probes each of 20 apps once per interval, never twice, spread over the interval', async () => {
    const t = tenant();
    for (let i = 0; i < APPS; i++) {
      const via = i % 2 ? first : second;
      await via.client.call(
        S.createApp,
        { slug: `app-${i}`, display_name: `App ${i}`, mcp_server_url: `${server.url}?app=${i}` },
        t.call,
      );
    }
    await eventually('every app probed once', async () => {
      const { data } = await first.client.call(S.listApps, { limit: 50 }, t.call);
      return data.length === APPS && data.every((a) => a.status === AppStatus.APP_STATUS_HEALTHY);
    });
    assert.equal(server.initializeLog.length, APPS, 'one probe per app at its creation');
    // Three intervals in steps of the clock; each app's probes by the step they ran at.
    const steps = new Map<string, number[]>();
    let seen = server.initializeLog.length;
    for (let step = 1; step <= 3 * STEPS_PER_INTERVAL; step++) {
      await clock.advance(STEP_MS);
      await eventually(
        'the probes of this step ran',
        async () =>
          (
            await first.db.query(
              `SELECT 1 FROM jobs WHERE queue = 'app-probes' AND state IN ('queued', 'running') LIMIT 1`,
            )
          ).rowCount === 0,
      );
      for (const { url } of server.initializeLog.slice(seen)) {
        const app = new URL(url, 'http://x').searchParams.get('app')!;
        steps.set(app, [...(steps.get(app) ?? []), step]);
      }
      seen = server.initializeLog.length;
    }
    assert.equal(steps.size, APPS, 'every app was probed by the schedule');
    for (const [app, at] of steps)
      assert.deepEqual(
        at.slice(1).map((s, i) => s - at[i]!),
        [STEPS_PER_INTERVAL, STEPS_PER_INTERVAL],
        `app ${app}: once per interval, at its slot (probed at steps ${at.join(', ')})`,
      );
    // Spread: the apps' slots do not all fall in one instant of the interval.
    const firsts = [...steps.values()].map((at) => at[0]!);
    assert.ok(
      Math.max(...firsts) - Math.min(...firsts) > STEPS_PER_INTERVAL / 3,
      `probes spread over the interval (first at steps ${firsts.join(', ')})`,
    );
  });
});
