/**
 * The product as a cluster runs it: every service's own main.js in its own process, configured
 * only through environment variables (as the Helm chart sets them), talking gRPC to each other and
 * Kafka when the run has a broker. Checks that each starts, the whole works through the gateway,
 * and SIGTERM drains and exits 0.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Keyring, generateToken } from '@workauto/crypto';
import { ensureDatabase } from '@workauto/db';
import { freePort } from '@workauto/testing';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

describe('services as separate processes (the deployment shape)', () => {
  const children = new Map<string, { proc: ChildProcess; output: string[] }>();
  let gateway = '';
  const adminToken = generateToken('wkadmin_', 40);

  function start(name: string, env: Record<string, string>) {
    const proc = spawn(process.execPath, [`services/${name}/dist/main.js`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...(process.env.KAFKA_BROKERS ? { KAFKA_BROKERS: process.env.KAFKA_BROKERS } : {}), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    proc.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
    proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
    children.set(name, { proc, output });
  }

  before(async () => {
    const server = process.env.TEST_DATABASE_URL;
    assert.ok(server, 'TEST_DATABASE_URL is set by the test wrapper');
    const run = `proc_${randomBytes(4).toString('hex')}`;
    const db = (s: string) => ensureDatabase(server, `${run}_${s}`);
    const keys = Keyring.generateSpec();
    const ports = { identity: await freePort(), notes: await freePort(), crm: await freePort(), gateway: await freePort() };
    const common = { ENCRYPTION_KEYS: keys, GRPC_HOST: '127.0.0.1' };
    start('identity', { ...common, DATABASE_URL: await db('identity'), GRPC_PORT: String(ports.identity), PLATFORM_ADMIN_TOKEN: adminToken });
    start('notes-tasks', { ...common, DATABASE_URL: await db('notes_tasks'), GRPC_PORT: String(ports.notes) });
    start('crm-pipelines', { ...common, DATABASE_URL: await db('crm_pipelines'), GRPC_PORT: String(ports.crm) });
    start('gateway', {
      ENCRYPTION_KEYS: keys, DATABASE_URL: await db('gateway'), HOST: '127.0.0.1', PORT: String(ports.gateway),
      IDENTITY_ADDR: `127.0.0.1:${ports.identity}`, NOTES_TASKS_ADDR: `127.0.0.1:${ports.notes}`, CRM_PIPELINES_ADDR: `127.0.0.1:${ports.crm}`,
    });
    gateway = `http://127.0.0.1:${ports.gateway}`;
    // Ready = the gateway's readiness, which asks every downstream's gRPC health service.
    for (let i = 0; ; i++) {
      const ready = await fetch(`${gateway}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      for (const [name, c] of children) assert.equal(c.proc.exitCode, null, `${name} exited during start-up:\n${c.output.join('')}`);
      assert.ok(i < 600, 'the services became ready within 60 s');
      await sleep(100);
    }
  });

  after(async () => {
    for (const { proc } of children.values()) if (proc.exitCode === null) proc.kill('SIGKILL');
  });

  it('serves the API through the gateway, with the audit log fed across processes', async () => {
    const call = async (method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`${gateway}/api/v1${path}`, {
        method, headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const tenant = await call('POST', '/admin/tenants', adminToken, { name: 'Procs', owner: { name: 'Owner', email: 'owner@procs.test' } });
    assert.equal(tenant.status, 201);
    const key = tenant.body.api_key as string;
    const note = await call('POST', '/notes', key, { title: 'from another process' });
    assert.equal(note.status, 201);
    const pipeline = await call('POST', '/pipelines', key, { name: 'Sales' });
    assert.equal(pipeline.status, 201);
    for (let i = 0; ; i++) {
      const log = await call('GET', '/audit-log?limit=200', key);
      const actions = new Set((log.body.data as { action: string }[]).map((e) => e.action));
      if (actions.has('note.created') && actions.has('pipeline.created')) break;
      assert.ok(i < 200, `note.created and pipeline.created reached the audit log; have ${[...actions].join(', ')}`);
      await sleep(50);
    }
  });

  it('drains and exits 0 on SIGTERM, the gateway first', async () => {
    for (const name of ['gateway', 'crm-pipelines', 'notes-tasks', 'identity']) {
      const { proc, output } = children.get(name)!;
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, `${name} exit code; its output:\n${output.join('')}`);
    }
  });
});
