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
import { pages, type WorkautoClient } from '@workauto/client';
import { startReceiver, type Receiver } from '@workauto/webhooks/testing';
import { captureLogs, eventually } from '@workauto/testing';
import { ok, startTestStack, type TestStack } from './harness.js';

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
    let api: WorkautoClient;
    let receiver: Receiver;
    let halted = false;

    before(async () => {
      const line = await kafka('start');
      assert.match(line, /^KAFKA_BROKERS=/);
      stack = await startTestStack({
        kafkaBrokers: line.slice('KAFKA_BROKERS='.length),
        gatewayOptions: { rateLimitPerMinute: 100_000 },
      });
      api = stack.client((await stack.createTenant('Acme')).key);
      receiver = await startReceiver();
      await ok(
        api.POST('/api/v1/webhook-endpoints', { body: { url: receiver.url, event_types: ['note.created'] } }),
        201,
      );
    });
    after(async () => {
      // A test that failed mid-outage leaves the broker halted: bring it back, so the stack's
      // producers and consumers can close instead of waiting on a broker that is gone.
      if (halted) await kafka('resume').catch(() => undefined);
      await stack?.stop();
      await receiver?.close();
      await kafka('stop');
    });

    /** Every audit entry of `action`, page after page. */
    const entriesOf = async (action: string) => {
      const entries = [];
      for await (const entry of pages((cursor) =>
        api.GET('/api/v1/audit-log', { params: { query: { action, limit: 200, cursor } } }),
      ))
        entries.push(entry);
      return entries;
    };
    const noteEntries = () => entriesOf('note.created');

    it('keeps 100 changes made while the broker is down and applies each once when it is back', async () => {
      // The pipeline works before the outage.
      await eventually(
        'tenant.created reached the audit log before the outage',
        async () => (await entriesOf('tenant.created')).length === 1,
      );
      halted = true;
      await kafka('halt');
      const logs = captureLogs();
      const ids: string[] = [];
      try {
        for (let i = 0; i < 100; i++) {
          const res = await api.POST('/api/v1/notes', { body: { title: `during the outage ${i}` } });
          assert.equal(res.response.status, 201, 'a change succeeds while the broker is down');
          ids.push(res.data!.id);
        }
        // The sentinel: notes-tasks' relay tried to publish after the 100 changes committed and failed,
        // with every one of them still in its outbox. Only then is "nothing arrived" worth checking.
        await eventually(
          "notes-tasks' relay failed to publish with the 100 changes pending",
          () =>
            logs.lines
              .flatMap((chunk) => chunk.split('\n'))
              .filter((line) => line.startsWith('{') && line.includes('events could not be published'))
              .map((line) => JSON.parse(line) as { source?: string; pending?: number })
              .some((line) => line.source === 'notes-tasks' && (line.pending ?? 0) >= 100),
          60_000,
          100,
        );
      } finally {
        logs.stop();
      }
      assert.equal((await noteEntries()).length, 0, 'nothing can arrive while the broker is down');
      await kafka('resume');
      halted = false;
      await eventually(
        'the 100 changes reached the audit log',
        async () => (await noteEntries()).length >= 100,
        90_000,
        250,
      );
      // The sentinel for duplicates: each note changed once more. Its note.updated has the note's key,
      // so it follows every copy of its note.created on the note's partition, and the audit consumer
      // applies a partition in order: once the 100 note.updated entries are in, any duplicate is too.
      for (const id of ids)
        await ok(api.PATCH('/api/v1/notes/{id}', { params: { path: { id } }, body: { is_pinned: true } }));
      await eventually(
        'the 100 note.updated entries reached the audit log',
        async () => new Set((await entriesOf('note.updated')).map((e) => e.resource_id)).size >= 100,
        90_000,
        250,
      );
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
