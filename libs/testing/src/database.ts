import { randomBytes } from 'node:crypto';
import { ensureDatabase } from '@workauto/db';

/**
 * A fresh, empty database on the test run's PostgreSQL server (TEST_DATABASE_URL, set by the
 * test wrapper that starts one embedded cluster per run), so test files never share state.
 */
export async function testDatabase(prefix: string): Promise<string> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL');
  return ensureDatabase(server, `t_${prefix.replace(/[^a-z0-9_]/g, '_')}_${randomBytes(4).toString('hex')}`);
}
