/**
 * `make dev`'s process as a person at a terminal meets it: a first start on an empty data folder
 * prints where the API and its docs are, and Ctrl-C (SIGINT to the terminal's whole foreground
 * process group) stops everything without a warning, a stack trace or advice about a Kafka it does
 * not run, and leaves no PostgreSQL behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));

describe('make dev', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'workauto-dev-'));
  // As root, PostgreSQL runs as the `postgres` user, which must reach its folder inside this one.
  chmodSync(dataDir, 0o755);
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('prints the docs URL when ready; Ctrl-C stops it without a warning and stops its PostgreSQL', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
    // make dev without a server or a broker: its embedded PostgreSQL and the in-process transport.
    for (const name of ['DATABASE_URL', 'KAFKA_BROKERS', 'TEST_DATABASE_URL']) delete env[name];
    // Its own process group, as a terminal's foreground job: SIGINT to the group is Ctrl-C.
    const dev = spawn(process.execPath, [MAIN], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    dev.stdout.on('data', (d: Buffer) => (output += d.toString()));
    dev.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = once(dev, 'exit');
    try {
      await new Promise<void>((resolve, reject) => {
        const check = () => (/is ready in/.test(output) ? resolve() : undefined);
        dev.stdout.on('data', check);
        void exited.then(([code]) => reject(new Error(`make dev exited (${String(code)}) before ready:\n${output}`)));
      });
      const docs = /docs: +(http:\/\/\S+\/api\/v1\/docs)/.exec(output)?.[1];
      assert.ok(docs, `the banner names the docs:\n${output}`);
      const page = await fetch(docs);
      assert.equal(page.status, 200);
      assert.match(page.headers.get('content-type') ?? '', /text\/html/);
      await page.text();

      const before = output.length;
      process.kill(-dev.pid!, 'SIGINT');
      const [code] = (await exited) as [number | null];
      const stopping = output.slice(before);
      assert.equal(code, 0, stopping);
      assert.match(stopping, /workauto stopped/);
      assert.deepEqual(
        stopping.split('\n').filter((l) => /"level":"(warn|error|fatal)"|^\s+at |Kafka/.test(l)),
        [],
        'no warning, stack trace or Kafka advice while stopping',
      );
      assert.equal(existsSync(join(dataDir, 'postgres/postmaster.pid')), false, 'PostgreSQL stopped cleanly');
    } finally {
      if (dev.exitCode === null) process.kill(-dev.pid!, 'SIGKILL');
    }
  });
});
