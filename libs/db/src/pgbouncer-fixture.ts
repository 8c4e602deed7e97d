/**
 * A real PgBouncer in transaction mode in front of the test server, for pgbouncer.test.ts and
 * scripts/compare-migration-runners.mjs (not exported by the package). The binary comes from
 * Debian's package through .ci/pgbouncer.sh (cached in .cache/pgbouncer).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** The PgBouncer binary, or why there is none on this machine (no apt-get: the caller skips). */
export function findPgBouncer(): { binary: string } | { missing: string } {
  const found = spawnSync(join(ROOT, '.ci/pgbouncer.sh'), { encoding: 'utf8' });
  if (found.status === 3) return { missing: found.stderr.trim() };
  if (found.status !== 0) throw new Error(`.ci/pgbouncer.sh failed:\n${found.stderr}`);
  return { binary: found.stdout.trim() };
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** A PgBouncer in transaction mode with poolSize server connections per database, in front of serverUrl. */
export async function startPgBouncer(
  binary: string,
  serverUrl: string,
  poolSize: number,
): Promise<{ url(db: string): string; stop(): Promise<void> }> {
  const server = new URL(serverUrl);
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'pgbouncer-'));
  chmodSync(dir, 0o755); // pgbouncer started as root switches to the postgres user, which reads the file
  const ini = join(dir, 'pgbouncer.ini');
  // trust still needs the user listed; the server password comes from the [databases] entry.
  await writeFile(join(dir, 'users.txt'), `"${server.username}" ""\n`, { mode: 0o644 });
  await writeFile(
    ini,
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port} user=${server.username} password=${server.password}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 100',
      // node-postgres sends the pool's statement_timeout as a startup parameter; PgBouncer 1.18
      // refuses unknown ones (1.20+ can track it instead: track_extra_parameters).
      'ignore_startup_parameters = statement_timeout',
    ].join('\n'),
  );
  chmodSync(ini, 0o644);
  const args = process.getuid?.() === 0 ? ['-u', 'postgres', ini] : [ini];
  const proc: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const url = (db: string) => `postgres://${server.username}:${server.password}@127.0.0.1:${port}/${db}`;
  for (let i = 0; ; i++) {
    const client = new pg.Client({ connectionString: url('postgres') });
    const ok = await client.connect().then(
      () => true,
      () => false,
    );
    await client.end().catch(() => undefined);
    if (ok) break;
    if (i > 100 || proc.exitCode !== null) {
      proc.kill('SIGKILL');
      throw new Error(`pgbouncer did not start:\n${output}`);
    }
    await sleep(50);
  }
  return {
    url,
    async stop() {
      proc.kill('SIGTERM');
      if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
    },
  };
}
