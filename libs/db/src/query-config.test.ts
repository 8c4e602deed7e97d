import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { createPool, ensureDatabase, type Pool } from './index.js';
import { QUERY_FIELDS } from './query-config.js';

describe("a query's config, read and not copied", () => {
  let pool: Pool;
  before(async () => {
    const server = process.env.TEST_DATABASE_URL;
    if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
    pool = createPool(await ensureDatabase(server, `t_qconfig_${randomBytes(4).toString('hex')}`), { max: 2 });
  });
  after(() => pool.end());

  it("reads every field pg's Query reads of a config", () => {
    const source = readFileSync(createRequire(import.meta.url).resolve('pg/lib/query.js'), 'utf8');
    const constructor = source.slice(source.indexOf('constructor('), source.indexOf('requiresPreparation('));
    const read = new Set([...constructor.matchAll(/\bconfig\.(\w+)/g)].map((m) => m[1]));
    assert.deepEqual(
      [...read].filter((f) => !(QUERY_FIELDS as readonly string[]).includes(f!)),
      [],
      'pg reads these config fields too: add them to QUERY_FIELDS in libs/db query-config.ts',
    );
    assert.ok(read.has('text') && read.has('name'), "the constructor's source was found");
  });

  it("runs a prepared statement's config again and again, and leaves the caller's object as it was", async () => {
    const config = { name: 'qconfig_add', text: 'SELECT $1::int + 1 AS n', values: [1] };
    const before = JSON.stringify(Object.entries(config));
    for (let i = 0; i < 3; i++) assert.equal((await pool.query<{ n: number }>(config)).rows[0]?.n, 2);
    // Values given apart win over the config's, as pg's own rule says, and change nothing of it.
    assert.equal((await pool.query<{ n: number }>(config, [41])).rows[0]?.n, 42);
    assert.equal(JSON.stringify(Object.entries(config)), before);
  });

  it('reads a field a config inherits (a getter on its prototype)', async () => {
    const config = Object.create({
      get text() {
        return 'SELECT 7 AS n';
      },
    }) as { text: string };
    assert.equal((await pool.query<{ n: number }>(config)).rows[0]?.n, 7);
  });
});
