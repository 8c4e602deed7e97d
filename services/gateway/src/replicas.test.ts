/**
 * Three gateway processes (as the chart's HPA runs them, on one database) in front of one identity:
 * a tenant's requests spread over all three are held to its per-minute limit together, not three
 * times over (docs/decisions.md, "Rate limits across gateway replicas").
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createIdentityService } from '@workauto/identity';
import { createLogger } from '@workauto/logger';
import { eventually, freePort, testCallerKeys, testDatabase } from '@workauto/testing';

const MAIN = fileURLToPath(new URL('./main.js', import.meta.url));
const ADMIN_TOKEN = `wkadmin_${randomBytes(24).toString('hex')}`;
const TENANT_LIMIT = 300;
const REPLICAS = 3;

describe('rate limits across gateway replicas', () => {
  let identity: { port: number; stop(): Promise<void> };
  const gateways: { proc: ChildProcess; url: string; output: string[] }[] = [];

  before(async () => {
    identity = await createIdentityService(
      {
        databaseUrl: await testDatabase('replicas_identity'),
        host: '127.0.0.1',
        port: 0,
        callerVerifyKeys: testCallerKeys.verifyKeys,
        platformAdminToken: ADMIN_TOKEN,
        encryptionKeys: `k1:${randomBytes(32).toString('base64')}`,
      },
      createLogger('identity', 'silent'),
    );
    const databaseUrl = await testDatabase('replicas_gateway');
    const encryptionKeys = `k1:${randomBytes(32).toString('base64')}`;
    for (let i = 0; i < REPLICAS; i++) {
      const port = await freePort();
      const proc = spawn(process.execPath, [MAIN], {
        env: {
          PATH: process.env.PATH ?? '',
          LOG_LEVEL: 'warn',
          HOST: '127.0.0.1',
          PORT: String(port),
          DATABASE_URL: databaseUrl,
          ENCRYPTION_KEYS: encryptionKeys,
          CALLER_SIGNING_KEY: testCallerKeys.signingKey,
          IDENTITY_ADDR: `127.0.0.1:${identity.port}`,
          // The per-credential limit out of the way: the tenant's is the one under test.
          RATE_LIMIT_PER_MINUTE: '100000',
          RATE_LIMIT_PER_TENANT_PER_MINUTE: String(TENANT_LIMIT),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const output: string[] = [];
      proc.stdout.on('data', (d: Buffer) => output.push(d.toString()));
      proc.stderr.on('data', (d: Buffer) => output.push(d.toString()));
      gateways.push({ proc, url: `http://127.0.0.1:${port}`, output });
    }
    for (const g of gateways) {
      await eventually(
        () => `a gateway is ready:\n${g.output.join('')}`,
        async () => {
          assert.equal(g.proc.exitCode, null, `a gateway exited during start-up:\n${g.output.join('')}`);
          return fetch(`${g.url}/readyz`).then(
            (r) => r.ok,
            () => false,
          );
        },
        60_000,
        100,
      );
    }
  });

  after(async () => {
    for (const g of gateways) g.proc.kill('SIGTERM');
    await Promise.all(
      gateways.map((g) => new Promise((r) => (g.proc.exitCode !== null ? r(0) : g.proc.on('exit', r)))),
    );
    await identity?.stop();
  });

  it(`holds a tenant's requests over ${REPLICAS} gateways to its per-minute limit (±10 %), not ${REPLICAS} times it`, async () => {
    const made = await fetch(`${gateways[0]!.url}/api/v1/admin/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Replicated', owner: { name: 'Owner', email: 'owner@example.com' } }),
    });
    assert.equal(made.status, 201, await made.clone().text());
    const key = ((await made.json()) as { api_key: string }).api_key;
    // The limit is per minute of the clock: the burst must fit in one (it takes a few seconds).
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 20_000) await sleep(left + 50);
    const minute = Math.floor(Date.now() / 60_000);

    const statuses = new Map<string, number>();
    const admittedBy = gateways.map(() => 0);
    let next = 0;
    const total = 2 * TENANT_LIMIT;
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        for (let i = next++; i < total; i = next++) {
          const g = i % REPLICAS;
          const res = await fetch(`${gateways[g]!.url}/api/v1/members`, {
            headers: { authorization: `Bearer ${key}` },
          });
          const body = (await res.json()) as { error?: { details?: { reason?: string }[] } };
          const outcome = res.status === 429 ? `429 ${body.error?.details?.[0]?.reason}` : String(res.status);
          statuses.set(outcome, (statuses.get(outcome) ?? 0) + 1);
          if (res.status === 200) admittedBy[g]!++;
        }
      }),
    );
    assert.equal(Math.floor(Date.now() / 60_000), minute, 'the burst ended in the minute it started in');
    const admitted = statuses.get('200') ?? 0;
    assert.deepEqual(
      [...statuses.keys()].sort(),
      ['200', '429 TENANT_RATE_LIMITED'],
      `every answer is a 200 or the tenant's 429: ${JSON.stringify([...statuses])}`,
    );
    assert.ok(
      admitted >= TENANT_LIMIT * 0.9 && admitted <= TENANT_LIMIT * 1.1,
      `${admitted} of ${total} requests admitted over ${REPLICAS} gateways with a limit of ${TENANT_LIMIT} (by gateway: ${admittedBy.join(', ')})`,
    );
    assert.ok(
      admittedBy.every((n) => n > 0),
      `every gateway served a share: ${admittedBy.join(', ')}`,
    );
  });
});
