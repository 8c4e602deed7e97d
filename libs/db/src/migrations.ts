import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type pg from 'pg';
import { withTransaction } from './pool.js';

/**
 * Applies the `NNN_name.sql` files of each folder in order, each in its own transaction, and
 * records them in schema_migrations. Idempotent: applied files are skipped. An advisory lock
 * makes concurrent starts (several replicas) apply each file once.
 */
export async function runMigrations(pool: pg.Pool, dirs: string[]): Promise<string[]> {
  const files: { version: string; path: string }[] = [];
  for (const dir of dirs) {
    for (const name of (await readdir(dir)).filter((n) => n.endsWith('.sql')).sort()) {
      files.push({ version: name.replace(/\.sql$/, ''), path: join(dir, name) });
    }
  }
  const applied: string[] = [];
  const lockClient = await pool.connect();
  try {
    // Migrations (and waiting for another replica's) may outlast the pool's statement_timeout.
    await lockClient.query('SET statement_timeout = 0');
    await lockClient.query('SELECT pg_advisory_lock(hashtext($1))', ['workauto.migrations']);
    await lockClient.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set(
      (await lockClient.query<{ version: string }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
    );
    for (const file of files) {
      if (done.has(file.version)) continue;
      const sql = await readFile(file.path, 'utf8');
      await withTransaction(pool, async (tx) => {
        await tx.query('SET LOCAL statement_timeout = 0');
        await tx.query(sql);
        await tx.query('INSERT INTO schema_migrations (version) VALUES ($1)', [file.version]);
      });
      applied.push(file.version);
    }
  } finally {
    await lockClient.query('SELECT pg_advisory_unlock(hashtext($1))', ['workauto.migrations']).catch(() => undefined);
    await lockClient.query('RESET statement_timeout').catch(() => undefined);
    lockClient.release();
  }
  return applied;
}
