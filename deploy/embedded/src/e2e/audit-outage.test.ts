/**
 * No loss across a Kafka outage, end to end: the broker stops, 100 API changes still succeed
 * (they only write their outbox), the broker comes back on the same port, and every audit entry
 * arrives exactly once, and every change reaches a webhook receiver (deduplicated on webhook-id). This file runs a broker of its own (halting the run's shared broker would
 * disturb the other test files).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startReceiver, type Receiver } from '@workauto/webhooks/testing';
import { eventually } from '@workauto/testing';
import { startTestStack, type TenantFixture, type TestStack } from './harness.js';

const KAFKA_SH = fileURLToPath(new URL('../../../../scripts/kafka.sh', import.meta.url));
const runDir = mkdtempSync(join(tmpdir(), 'workauto-outage-kafka-'));

const run = promisify(execFile);

/**
 * Runs scripts/kafka.sh without blocking the event loop: the stack under test lives in this
 * process, and a loop frozen for the seconds a halt takes makes its keep-alive sockets race (the
 * client reuses a socket the server is closing: ECONNRESET) — a failure of the test, not the product.
 */
async function kafka(command: 'start' | 'stop' | 'halt' | 'resume'): Promise<string> {
  try {
    const { stdout } = await run('bash', [KAFKA_SH, command], {
      encoding: 'utf8',
      env: { ...process.env, KAFKA_RUN_DIR: runDir },
    });
    return stdout.trim().split('\n').pop() ?? '';
  } catch (err) {
    const e = err as { code?: unknown; stderr?: string };
    throw new Error(`kafka.sh ${command} failed (${String(e.code)}): ${e.stderr ?? ''}`, { cause: err });
  }
}

describe(
  'audit log across a Kafka outage',
  { skip: process.env.WORKAUTO_KAFKA === 'off' ? 'WORKAUTO_KAFKA=off' : false },
  () => {
    let stack: TestStack;
    let acme: TenantFixture;
    let receiver: Receiver;
    let halted = false;

    before(async () => {
      const line = await kafka('start');
      assert.match(line, /^KAFKA_BROKERS=/);
      stack = await startTestStack({
        kafkaBrokers: line.slice('KAFKA_BROKERS='.length),
        gatewayOptions: { rateLimitPerMinute: 100_000 },
      });
      acme = await stack.createTenant('Acme');
      receiver = await startReceiver();
      const ep = await stack.api('POST', '/api/v1/webhook-endpoints', {
        key: acme.key,
        body: { url: receiver.url, event_types: ['note.created'] },
      });
      assert.equal(ep.status, 201, JSON.stringify(ep.body));
    });
    after(async () => {
      // A test that failed mid-outage leaves the broker halted: bring it back, so the stack's
      // producers and consumers can close instead of waiting on a broker that is gone.
      if (halted) await kafka('resume').catch(() => undefined);
      await stack?.stop();
      await receiver?.close();
      await kafka('stop');
    });

    const noteEntries = async () => {
      const entries: { resource_id: string }[] = [];
      let cursor: string | undefined;
      do {
        const page = await stack.api(
          'GET',
          `/api/v1/audit-log?action=note.created&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          { key: acme.key },
        );
        assert.equal(page.status, 200);
        entries.push(...page.body.data);
        cursor = page.body.has_more ? page.body.next_cursor : undefined;
      } while (cursor);
      return entries;
    };

    it('keeps 100 changes made while the broker is down and applies each once when it is back', async () => {
      // The pipeline works before the outage.
      await eventually(
        'tenant.created reached the audit log before the outage',
        async () =>
          (await stack.api('GET', '/api/v1/audit-log?action=tenant.created', { key: acme.key })).body.data.length === 1,
      );
      halted = true;
      await kafka('halt');
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) {
        const res = await stack.api('POST', '/api/v1/notes', {
          key: acme.key,
          body: { title: `during the outage ${i}` },
        });
        assert.equal(res.status, 201, 'a change succeeds while the broker is down');
        ids.push(res.body.id);
      }
      await sleep(1_000);
      assert.equal((await noteEntries()).length, 0, 'nothing can arrive while the broker is down');
      await kafka('resume');
      halted = false;
      await eventually(
        'the 100 changes reached the audit log',
        async () => (await noteEntries()).length >= 100,
        90_000,
        250,
      );
      await sleep(2_000); // anything extra (a duplicate) would arrive by now
      const entries = await noteEntries();
      assert.equal(entries.length, 100, 'every change has its entry, none twice');
      assert.deepEqual(entries.map((e) => e.resource_id).sort(), [...ids].sort());
      // The webhooks intake consumed the same changes from the domain-events topic.
      const delivered = () => new Set(receiver.received.map((r) => JSON.parse(r.body).data.id as string));
      await eventually('the 100 changes reached the webhook receiver', () => delivered().size >= 100, 60_000, 100);
      assert.deepEqual([...delivered()].sort(), [...ids].sort(), 'every change reached the webhook receiver');
    });
  },
);
