import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppStatus } from '@workauto/protos/workauto/apps/v1/apps.js';
import { eventually } from '@workauto/testing';
import { S, startApps, tenant, type Apps } from './test-support.js';
import { startMcpServer, type McpTestServer } from './testing/mcp-servers.js';

const INTERVAL_MS = 3_000;
const APPS = 20;

describe('scheduled probes across two replicas', () => {
  let first: Apps;
  let second: Apps;
  let server: McpTestServer;
  before(async () => {
    server = await startMcpServer({ transport: 'streamable', tools: [{ name: 'a' }] });
    first = await startApps({ probeIntervalMs: INTERVAL_MS });
    // The deployment shape: a second replica on the same database.
    second = await startApps({
      probeIntervalMs: INTERVAL_MS,
      databaseUrl: first.databaseUrl,
      encryptionKeys: first.encryptionKeys,
    });
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
    const from = Date.now();
    await new Promise((r) => setTimeout(r, 3 * INTERVAL_MS));
    const to = Date.now();
    const probes = new Map<string, number[]>();
    for (const { at, url } of server.initializeLog) {
      if (at < from || at > to) continue;
      const app = new URL(url, 'http://x').searchParams.get('app')!;
      probes.set(app, [...(probes.get(app) ?? []), at]);
    }
    assert.equal(probes.size, APPS, 'every app was probed by the schedule');
    for (const [app, times] of probes) {
      // Three intervals hold three slots of each app; a probe runs up to a poll (1 s) after its slot,
      // so a window edge can cut one off or let one in — but never two probes within one interval.
      assert.ok(times.length >= 2 && times.length <= 4, `app ${app} probed ${times.length} times in 3 intervals`);
      for (let i = 1; i < times.length; i++) {
        assert.ok(
          times[i]! - times[i - 1]! > INTERVAL_MS - 1_500,
          `app ${app} probed twice within ${times[i]! - times[i - 1]!} ms`,
        );
      }
    }
    // Spread: the first scheduled probes of the 20 apps do not all fall in one instant.
    const firsts = [...probes.values()].map((times) => times[0]! % INTERVAL_MS).sort((a, b) => a - b);
    assert.ok(
      firsts.at(-1)! - firsts[0]! > INTERVAL_MS / 3,
      `probes spread over the interval (offsets ${firsts.join(', ')})`,
    );
  });
});
