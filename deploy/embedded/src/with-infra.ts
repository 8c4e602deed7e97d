/**
 * Runs a command with the infrastructure the test suite needs, then tears it down:
 * one throwaway embedded PostgreSQL cluster (TEST_DATABASE_URL) unless DATABASE_URL names a real
 * server, and a real Kafka broker (KAFKA_BROKERS) from scripts/kafka.sh unless KAFKA_BROKERS is
 * set or WORKAUTO_KAFKA=off (KAFKA_LINE=4: the current 4.x line instead of 3.9). Usage: node with-infra.js -- <command…>
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '@workauto/testing';

const sep = process.argv.indexOf('--');
const command = sep >= 0 ? process.argv.slice(sep + 1) : [];
if (command.length === 0) {
  console.error('usage: with-infra -- <command> [args…]');
  process.exit(2);
}
const repoRoot = join(import.meta.dirname, '..', '..', '..');
const env: NodeJS.ProcessEnv = { ...process.env };
const cleanups: (() => Promise<void> | void)[] = [];

async function main(): Promise<number> {
  if (env.DATABASE_URL) {
    env.TEST_DATABASE_URL = env.DATABASE_URL;
  } else {
    const started = Date.now();
    const dir = mkdtempSync(join(tmpdir(), 'workauto-test-pg-'));
    const pg = await startEmbeddedPostgres({ dir, persistent: false });
    cleanups.push(async () => {
      await pg.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    env.TEST_DATABASE_URL = pg.url;
    console.log(`with-infra: PostgreSQL ready in ${Date.now() - started} ms`);
  }
  if (!env.KAFKA_BROKERS && env.WORKAUTO_KAFKA !== 'off') {
    const script = join(repoRoot, 'scripts', 'kafka.sh');
    const started = Date.now();
    // A broker of this run only (its own directory), so runs side by side do not stop each other's.
    const runDir = mkdtempSync(join(tmpdir(), 'workauto-test-kafka-'));
    const kafkaEnv = { ...env, KAFKA_RUN_DIR: runDir };
    const out = spawnSync('bash', [script, 'start'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      env: kafkaEnv,
    });
    const line = out.stdout.trim().split('\n').pop() ?? '';
    if (out.status !== 0 || !line.startsWith('KAFKA_BROKERS=')) {
      console.error(`with-infra: the Kafka broker did not start (exit ${out.status}); see the output above`);
      return 1;
    }
    env.KAFKA_BROKERS = line.slice('KAFKA_BROKERS='.length);
    cleanups.push(() => void spawnSync('bash', [script, 'stop'], { stdio: 'inherit', env: kafkaEnv }));
    console.log(
      `with-infra: Kafka ${env.KAFKA_LINE === '4' ? '4.x' : '3.9'} ready at ${env.KAFKA_BROKERS} in ${Date.now() - started} ms`,
    );
  }
  const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit', env });
  const forward = (s: NodeJS.Signals) => child.kill(s);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

let code = 1;
try {
  code = await main();
} catch (err) {
  console.error('with-infra:', err);
} finally {
  for (const c of cleanups.reverse()) await c();
}
process.exit(code);
