import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createPool, ensureDatabase, type Pool } from './index.js';
import { timestamptzParser } from './timestamptz.js';

/** Marks what the fast path hands on, so a test sees which texts it read itself. */
const handedOn = (text: string) => ({ handedOn: text });
const parse = timestamptzParser(handedOn);

/** The same instant by JavaScript's own ISO 8601 parser: milliseconds, offset as ±HH:MM. */
function reference(text: string): number {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d+))?([+-]\d{2})(?::(\d{2}))?$/.exec(text)!;
  return Date.parse(`${m[1]}T${m[2]}.${(m[3] ?? '').slice(0, 3).padEnd(3, '0')}${m[4]}:${m[5] ?? '00'}`);
}

describe('timestamptz', () => {
  it('reads the ISO text of every offset and fraction length, as the instant it names', () => {
    const texts = [
      '2026-11-30 09:17:19+00',
      '2026-11-30 09:17:19.5+00',
      '2026-11-30 09:17:19.05+00',
      '2026-11-30 09:17:19.123+00',
      '2026-11-30 09:17:19.123456+00',
      '2026-11-30 09:17:19.999999+01',
      '2024-02-29 00:00:00.000001-05',
      '1969-12-31 23:59:59.999+00',
      '2026-03-29 02:30:00+05:30',
      '2026-03-29 02:30:00.25-03:30',
      '1000-01-01 00:00:00+00',
      '9999-12-31 23:59:59.999999+00',
    ];
    for (const text of texts) {
      const value = parse(text);
      assert.ok(value instanceof Date, `${text} is read, not handed on`);
      assert.equal(value.getTime(), reference(text), text);
    }
  });

  it("hands every other shape to pg's parser", () => {
    for (const text of [
      'infinity',
      '-infinity',
      '0099-01-01 00:00:00+00', // Date.UTC would read year 99 as 1999
      '0500-06-01 12:00:00+00',
      '12026-01-01 00:00:00+00',
      '2026-01-01 00:00:00+00 BC',
      '1900-01-01 00:00:00+00:53:28', // an offset with seconds (local mean time)
      '2026-01-01T00:00:00+00', // another DateStyle's separator
      '2026-01-01 00:00:0x+00',
      '2026-01-01 00:00:00+0x',
      '2026-01-01',
    ])
      assert.deepEqual(parse(text), { handedOn: text }, text);
  });

  describe('through PostgreSQL', () => {
    let pool: Pool;
    before(async () => {
      const server = process.env.TEST_DATABASE_URL;
      if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests through with-infra (make test)');
      pool = createPool(await ensureDatabase(server, `t_ts_${randomBytes(4).toString('hex')}`), { max: 1 });
    });
    after(() => pool.end());

    it("reads the server's timestamps in any session TimeZone as the same instants", async () => {
      const instants = [
        '2026-11-30T09:17:19.123456Z',
        '2024-02-29T23:59:59Z',
        '1970-01-01T00:00:00.5Z',
        '0044-03-15T12:00:00Z',
      ];
      for (const zone of ['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'America/St_Johns', 'Asia/Kathmandu']) {
        const client = await pool.connect();
        try {
          await client.query(`SET TimeZone = '${zone}'`);
          const { rows } = await client.query<{ at: Date; text: string }>(
            'SELECT t AS at, t::text AS text FROM unnest($1::timestamptz[]) AS t',
            [instants],
          );
          rows.forEach((row, i) =>
            assert.equal(row.at.toISOString(), new Date(instants[i]!).toISOString(), `${zone}: ${row.text}`),
          );
        } finally {
          await client.query('RESET TimeZone');
          client.release();
        }
      }
    });
  });
});
