/**
 * The chart's schema (charts/workauto/values.schema.json, definitions.env) against the services'
 * own parsers: every value the schema lets through is one the service starts with, and every value
 * a service refuses at start is refused by the schema when it is rendered (docs/operations.md,
 * "Deploying with Helm"). The services run as processes with the values, as a pod would; a run with
 * every valid value gets past its configuration (then fails to reach a database that is not there),
 * a run with bad values exits with one line naming each of them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { generateCallerKeys } from '@workauto/grpc';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
type Value = string | number | boolean;
interface Case {
  valid: Value[];
  invalid: Value[];
}

/** What each service is started with, by variable: values the schema and the service both accept, and both refuse. */
const CASES: Record<string, Record<string, Case>> = {
  webhooks: {
    WEBHOOK_RETRY_SCHEDULE: { valid: ['0s,5s,5m,30m', ''], invalid: ['5,10', '0s,5x'] },
    WEBHOOK_TIMEOUT_MS: { valid: [15000, '15000'], invalid: ['15s', 0] },
    WEBHOOK_SECRET_GRACE: { valid: ['24h', '90m'], invalid: [86400000, '1 day'] },
    WEBHOOK_DISABLE_AFTER: { valid: ['5d', ''], invalid: ['5days', '5'] },
    WEBHOOK_ENDPOINT_CONCURRENCY: { valid: [4, '100'], invalid: [0, 101] },
    WEBHOOK_WORKER_CONCURRENCY: { valid: [0, 64], invalid: [-1, 1001] },
    WEBHOOK_MAX_ENDPOINTS: { valid: [100], invalid: [0, 10001] },
    WEBHOOK_RETENTION_DAYS: { valid: [30], invalid: [0, 3651] },
    EGRESS_ALLOW_PRIVATE: { valid: ['false', true], invalid: ['yes', 'TRUE'] },
    EGRESS_ALLOWED_CIDRS: { valid: ['10.20.0.0/16,fd00::/8'], invalid: ['10.20.0.0', 'intranet'] },
  },
  apps: {
    APPS_PROBE_INTERVAL: { valid: ['5m', '1000ms'], invalid: [300, '500ms'] },
    APPS_TOOL_CALL_TIMEOUT_MS: { valid: [60000], invalid: ['1m', 1.5] },
    APPS_TOOL_RESULT_MAX_BYTES: { valid: [1048576], invalid: [1023, 4194305] },
  },
  agents: {
    OPENAI_BASE_URL: {
      valid: ['https://api.openai.com/v1', 'http://llm.internal:8000/v1'],
      invalid: ['api.openai.com', 'https://'],
    },
    AGENT_PROVIDER_MAX_RETRIES: { valid: [2], invalid: [11, -1] },
    AGENT_RUN_HEARTBEAT_MS: { valid: [2000], invalid: [99, 5001] },
    AGENT_PLATFORM_FEE_BPS: { valid: [0], invalid: [100001, -5] },
    AGENT_RUN_LEASE_MS: { valid: [30000], invalid: ['30s', 0] },
  },
  identity: {
    OAUTH_REDIRECT_BASE_URL: { valid: ['https://api.example.com'], invalid: ['api.example.com', 'not a url'] },
    STARTUP_TIMEOUT_MS: { valid: [1000], invalid: ['5m', 0] },
  },
};

const schema = JSON.parse(readFileSync(`${ROOT}charts/workauto/values.schema.json`, 'utf8')) as {
  definitions: Record<string, unknown>;
};
const envSchema = new Ajv({ strict: false }).compile({ $ref: '#/definitions/env', definitions: schema.definitions });

/** As the chart renders a value into the pod's env (a whole number stays one); '' is left out. */
const rendered = (v: Value) => String(v);

/** Starts services/<name>/dist/main.js with env; resolves to its exit code and the fatal line. */
function run(name: string, env: Record<string, string>): Promise<{ code: number | null; fatal: string }> {
  const keys = generateCallerKeys('gateway');
  const child = spawn(process.execPath, [`services/${name}/dist/main.js`], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      // Nothing listens there: a run whose configuration passes waits for it, then exits saying so.
      DATABASE_URL: 'postgres://workauto@127.0.0.1:1/none',
      KAFKA_BROKERS: '127.0.0.1:1',
      GRPC_PORT: '0',
      CALLER_VERIFY_KEYS: keys.verifyKeys,
      CALLER_SIGNING_KEY: keys.signingKey,
      ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
      PLATFORM_ADMIN_TOKEN: randomBytes(24).toString('hex'),
      STARTUP_TIMEOUT_MS: '1000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) =>
    child.on('exit', (code) =>
      resolve({
        code,
        fatal: out.split('\n').find((l) => l.includes('"level":"fatal"') || l.includes('"level":60')) ?? out,
      }),
    ),
  );
}

describe('the chart schema holds each value to the rules of the service that reads it', () => {
  it('accepts in the schema exactly what the services accept, for every case', () => {
    for (const [service, vars] of Object.entries(CASES))
      for (const [name, { valid, invalid }] of Object.entries(vars)) {
        for (const v of valid)
          assert.ok(
            envSchema({ [name]: v }),
            `${service} ${name}=${JSON.stringify(v)}: refused by the schema, accepted by the service`,
          );
        for (const v of invalid)
          assert.ok(
            !envSchema({ [name]: v }),
            `${service} ${name}=${JSON.stringify(v)}: accepted by the schema, refused by the service`,
          );
      }
  });

  for (const [service, vars] of Object.entries(CASES)) {
    it(`${service}: starts past its configuration with every valid value, and names every invalid one`, async () => {
      const rounds = Math.max(...Object.values(vars).flatMap((c) => [c.valid.length, c.invalid.length]));
      const runs: Promise<void>[] = [];
      for (let r = 0; r < rounds; r++) {
        const valid = Object.fromEntries(
          Object.entries(vars).flatMap(([n, c]) => {
            const v = c.valid[r] ?? c.valid[0]!;
            return v === '' ? [] : [[n, rendered(v)]];
          }),
        );
        runs.push(
          run(service, valid).then(({ code, fatal }) => {
            assert.equal(code, 1, fatal);
            assert.doesNotMatch(fatal, /invalid configuration/, `valid values refused: ${JSON.stringify(valid)}`);
            assert.match(fatal, /did not start/);
          }),
        );
        const bad = Object.entries(vars).flatMap(([n, c]): [string, string][] => {
          const v = c.invalid[r];
          return v === undefined ? [] : [[n, rendered(v)]];
        });
        if (!bad.length) continue;
        runs.push(
          run(service, Object.fromEntries(bad)).then(({ code, fatal }) => {
            assert.equal(code, 1, fatal);
            assert.match(fatal, /invalid configuration/);
            for (const [n, v] of bad) assert.match(fatal, new RegExp(n), `${n}=${v} was not refused:\n${fatal}`);
          }),
        );
      }
      await Promise.all(runs);
    });
  }
});
