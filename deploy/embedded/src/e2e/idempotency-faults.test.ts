/**
 * Idempotency-Key across faults between the client and the database, reproduced deterministically
 * with stopped processes (SIGSTOP / SIGCONT) in the deployment shape (each service its own process,
 * two gateways): a POST the gateway answered 504 although the service committed it, and a gateway
 * that died after the service committed. The retry with the same key returns the first result,
 * marked replayed, and the resource exists once (docs/api.md, Idempotency).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Keyring, generateToken } from '@workauto/crypto';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';

describe(
  'Idempotency-Key when a process stops mid-request',
  { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    let cluster: ServiceProcesses;
    let key: string;
    const adminToken = generateToken('wkadmin_', 40);

    const call = async (
      gateway: number,
      method: string,
      path: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) => {
      const res = await fetch(`${cluster.urls[gateway]}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      return {
        status: res.status,
        replayed: res.headers.get('idempotent-replayed'),
        body: (await res.json().catch(() => undefined)) as Record<string, any>,
      };
    };
    const signal = (child: string, sig: NodeJS.Signals) => cluster.children.get(child)!.proc.kill(sig);

    before(async () => {
      cluster = await startServiceProcesses({
        databaseServerUrl: process.env.TEST_DATABASE_URL!,
        databasePrefix: `idemf_${randomBytes(4).toString('hex')}`,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
        gateways: 2,
      });
      const res = await fetch(`${cluster.url}/api/v1/admin/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Faults', owner: { name: 'Owner', email: 'owner@faults.test' } }),
      });
      assert.equal(res.status, 201);
      key = ((await res.json()) as { api_key: string }).api_key;
    });
    after(async () => {
      for (const { proc } of cluster?.children.values() ?? []) {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGCONT');
          proc.kill('SIGKILL');
        }
      }
    });

    it('a POST answered 504 after the service committed it: the retry replays it, one event', async () => {
      const calendar = await call(0, 'POST', '/calendars', { name: 'Faults' });
      assert.equal(calendar.status, 201);
      const idempotencyKey = randomUUID();
      const event = {
        calendar_id: calendar.body.id,
        title: 'Stand-up',
        start_at: '2031-01-06T09:00:00Z',
        end_at: '2031-01-06T09:15:00Z',
      };
      const headers = { 'idempotency-key': idempotencyKey };
      // The call waits in calendar's socket; calendar then runs it (its deadline counts from when it
      // reads the call) while the gateway is stopped, and the gateway wakes past its own deadline.
      signal('calendar', 'SIGSTOP');
      const first = call(0, 'POST', '/events', event, headers);
      await sleep(500);
      signal('gateway', 'SIGSTOP');
      signal('calendar', 'SIGCONT');
      await sleep(6_000);
      signal('gateway', 'SIGCONT');
      const answered = await first;
      const retry = await call(0, 'POST', '/events', event, headers);
      const list = await call(
        0,
        'GET',
        `/events?calendar_id=${calendar.body.id}&from=2031-01-01T00:00:00Z&to=2031-02-01T00:00:00Z&limit=200`,
      );
      const events = (list.body.data as { title: string }[]).filter((e) => e.title === 'Stand-up');
      console.log(
        `504 then retry: first ${answered.status}, retry ${retry.status} replayed=${retry.replayed}, events ${events.length}`,
      );
      assert.equal(answered.status, 504, 'the gateway gave up on the call');
      assert.equal(retry.status, 201);
      assert.equal(retry.replayed, 'true', 'the retry is the first call replayed');
      assert.equal(events.length, 1, 'one event, not two');
      assert.equal(retry.body.id, (events[0] as { id?: string }).id);
    });

    it('a gateway that dies after the service committed: the other gateway replays it within 15 s', async () => {
      const idempotencyKey = randomUUID();
      const headers = { 'idempotency-key': idempotencyKey };
      const body = { title: `gateway-crash ${idempotencyKey}` };
      // notes-tasks commits while the first gateway is stopped; the gateway is then killed before it
      // could record the response. (A first call connects the gateway to notes-tasks.)
      assert.equal((await call(0, 'GET', '/notes?limit=1')).status, 200);
      signal('notes-tasks', 'SIGSTOP');
      const first = call(0, 'POST', '/notes', body, headers).catch(() => undefined);
      await sleep(500);
      signal('gateway', 'SIGSTOP');
      signal('notes-tasks', 'SIGCONT');
      await sleep(1_000);
      signal('gateway', 'SIGKILL');
      await first;
      const started = Date.now();
      const statuses: number[] = [];
      let retry: Awaited<ReturnType<typeof call>> | undefined;
      while (Date.now() - started < 30_000) {
        retry = await call(1, 'POST', '/notes', body, headers);
        statuses.push(retry.status);
        if (retry.status !== 409 || retry.body?.error?.details?.[0]?.reason !== 'IDEMPOTENCY_KEY_IN_USE') break;
        await sleep(Number(retry.body?.error ? 1_000 : 0));
      }
      const tookMs = Date.now() - started;
      const list = await call(1, 'GET', '/notes?limit=200');
      const notes = (list.body.data as { title: string }[]).filter((n) => n.title === body.title);
      console.log(
        `gateway crash then retry through the other: ${statuses.filter((s) => s === 409).length} × 409 over ${tookMs} ms, then ${retry?.status} replayed=${retry?.replayed}; notes ${notes.length}`,
      );
      assert.equal(retry?.status, 201, `statuses ${statuses.join(',')}`);
      assert.equal(retry?.replayed, 'true', 'the retry is the first call replayed');
      assert.ok(tookMs <= 16_000, `taken over within 15 s (took ${tookMs} ms)`);
      assert.equal(notes.length, 1, 'one note, not two');
    });
  },
);
