/**
 * A service's main refuses to start without the keys that verify caller identity (and the gateway's
 * without the key that signs it), with a message that names what to set: a service that started
 * without them would either trust nothing or, worse, be tempted to trust metadata.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { generateCallerKeys } from '@workauto/grpc';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** Runs a service's main.js with only `env`; resolves to its exit code and what it printed. */
async function start(service: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const proc = spawn(process.execPath, [`services/${service}/dist/main.js`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
  const [code] = (await once(proc, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, output };
}

// Unreachable on purpose: the start must fail on the keys before it connects to anything.
const base = { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', KAFKA_BROKERS: '127.0.0.1:1', LOG_LEVEL: 'fatal' };

describe('caller identity keys at start-up', () => {
  it('a service without CALLER_VERIFY_KEYS refuses to start and says what to set', async () => {
    const { code, output } = await start('notes-tasks', base);
    assert.notEqual(code, 0);
    assert.match(output, /CALLER_VERIFY_KEYS: is required: the JWKS/);
  });

  it('a service given a private key as a verify key refuses to start', async () => {
    const { code, output } = await start('crm-pipelines', {
      ...base,
      CALLER_VERIFY_KEYS: JSON.stringify({ keys: [JSON.parse(generateCallerKeys('k1').signingKey)] }),
    });
    assert.notEqual(code, 0);
    assert.match(output, /caller verify key k1 is a private key/);
    assert.doesNotMatch(output, /"d":/, 'the private key is not echoed');
  });

  it('the gateway without CALLER_SIGNING_KEY refuses to start and says what to set', async () => {
    const { code, output } = await start('gateway', {
      DATABASE_URL: base.DATABASE_URL,
      ENCRYPTION_KEYS: 'k1:' + Buffer.alloc(32).toString('base64'),
      LOG_LEVEL: 'fatal',
    });
    assert.notEqual(code, 0);
    assert.match(output, /CALLER_SIGNING_KEY: is required/);
  });
});
