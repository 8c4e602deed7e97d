/**
 * GET /api/v1/audit-log/export end to end: entries made through the API, exported through the
 * gateway's streaming route as NDJSON and CSV, and compared with what GET /audit-log lists.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { parse } from 'csv-parse/sync';
import { pages, type paths } from '@workauto/client';
import { eventually } from '@workauto/testing';
import { assertError, fails, ok, startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

/** The filters GET /audit-log and its export share. */
type Filters = Omit<NonNullable<paths['/api/v1/audit-log']['get']['parameters']['query']>, 'limit' | 'cursor'>;

// The header docs/identity.md "Audit log" gives, written out here rather than taken from the code under test.
const COLUMNS =
  'id,tenant_id,action,actor_id,actor_type,created_at,metadata,ip_address,resource_id,resource_type,user_agent,member_id'.split(
    ',',
  );

describe('audit log export', () => {
  let stack: TestStack;
  let acme: TenantFixture;
  let other: TenantFixture;
  let bot: { id: string; key: string };
  const otherNotes: string[] = [];

  /** The export as the client receives it, read whole: status, content type and the body's text (a stream, so raw). */
  const exportOf = async (key: string, query: string) => {
    const res = await fetch(`${stack.url}/api/v1/audit-log/export?${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    return { status: res.status, type: res.headers.get('content-type'), headers: res.headers, text: await res.text() };
  };
  /** Every page of GET /audit-log with filters, newest first. */
  const listAll = async (key: string, filters: Filters = {}) => {
    const api = stack.client(key);
    const all = [];
    for await (const entry of pages((cursor) =>
      api.GET('/api/v1/audit-log', { params: { query: { ...filters, limit: 200, cursor } } }),
    ))
      all.push(entry);
    return all;
  };
  const notes = (key: string, count: number, prefix: string) =>
    Promise.all(
      Array.from(
        { length: count },
        async (_, i) =>
          (
            await ok(
              stack.client(key).POST('/api/v1/notes', {
                // A user agent a CSV writer must quote (and metadata, JSON text, always is).
                headers: { 'user-agent': 'export-e2e/1.0 (comma, "quote")' },
                body: { title: `${prefix} ${i}` },
              }),
              201,
            )
          ).id,
      ),
    );

  before(async () => {
    stack = await startTestStack({ kafkaBrokers: undefined, gatewayOptions: { rateLimitPerMinute: 100_000 } });
    acme = await stack.createTenant('Acme');
    other = await stack.createTenant('Other');
    const key = await ok(stack.client(acme.key).POST('/api/v1/api-keys', { body: { name: 'export-bot' } }), 201);
    bot = { id: key.id, key: key.api_key! };
    // A few hundred entries in all: 200 notes by the owner's key, 100 by the bot's, in parallel groups.
    for (let i = 0; i < 20; i++) await notes(acme.key, 10, `owner ${i}`);
    for (let i = 0; i < 10; i++) await notes(bot.key, 10, `bot ${i}`);
    for (let i = 0; i < 2; i++) otherNotes.push(...(await notes(other.key, 10, `other ${i}`)));
    // Identity applies the audit stream shortly after each commit: wait until every note is in.
    let have = '';
    await eventually(
      () => `300 and 20 note.created entries, have ${have}`,
      async () => {
        const created = await listAll(acme.key, { action: 'note.created' });
        const others = await listAll(other.key, { action: 'note.created' });
        have = `${created.length} and ${others.length}`;
        return created.length === 300 && others.length === 20;
      },
      20_000,
      50,
    );
  });
  after(() => stack?.stop());

  it('streams every entry as NDJSON, oldest first, exactly as the list shows them', async () => {
    const listed = await listAll(acme.key);
    assert.ok(listed.length >= 303, `${listed.length} entries`);
    const res = await exportOf(acme.key, 'format=ndjson');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.type, 'application/x-ndjson');
    // Saved as a file named for the day (UTC) of the export.
    const today = new Date().toISOString().slice(0, 10);
    assert.equal(res.headers.get('content-disposition'), `attachment; filename="audit-log-${today}.ndjson"`);
    assert.ok(res.text.endsWith('\n'));
    const lines = res.text.slice(0, -1).split('\n');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l)),
      [...listed].reverse(),
    );
    for (const id of otherNotes) assert.ok(!res.text.includes(id), 'no entry about another tenant’s note');
  });

  it('streams the same entries as CSV that a CSV parser reads back field for field', async () => {
    const listed = [...(await listAll(acme.key))].reverse();
    const res = await exportOf(acme.key, 'format=csv');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.type, 'text/csv; charset=utf-8');
    assert.match(
      res.headers.get('content-disposition') ?? '',
      /^attachment; filename="audit-log-\d{4}-\d{2}-\d{2}\.csv"$/,
    );
    const rows: string[][] = parse(res.text, { record_delimiter: '\r\n' });
    assert.deepEqual(rows[0], COLUMNS, 'a header row');
    const records: Record<string, string>[] = parse(res.text, { columns: true, record_delimiter: '\r\n' });
    assert.equal(records.length, listed.length);
    for (const [i, entry] of listed.entries()) {
      const record = records[i]!;
      for (const column of COLUMNS) {
        const value = (entry as Record<string, unknown>)[column];
        if (column === 'metadata') assert.deepEqual(JSON.parse(record.metadata!), value, `metadata of ${entry.id}`);
        else assert.equal(record[column], value === null ? '' : String(value), `${column} of ${entry.id}`);
      }
    }
    assert.ok(records.some((r) => r.user_agent === 'export-e2e/1.0 (comma, "quote")'));
  });

  it('applies the list’s filters, from inclusive and to exclusive', async () => {
    const byBot = [...(await listAll(acme.key, { actor_id: bot.id }))].reverse();
    assert.equal(byBot.length, 100);
    const from = byBot[10]!.created_at!;
    const to = byBot[90]!.created_at!;
    const filters = { action: 'note.created', resource_type: 'note', actor_id: bot.id, from, to };
    const query = new URLSearchParams(filters).toString();
    const expected = byBot.filter((e) => e.created_at! >= from && e.created_at! < to);
    assert.ok(expected.length >= 80, 'the window holds the 10th to the 89th entry, and any at the same instant');
    assert.deepEqual([...(await listAll(acme.key, filters))].reverse(), expected, 'the list filters the same');
    const csv = await exportOf(acme.key, `format=csv&${query}`);
    assert.equal(csv.status, 200, csv.text);
    const records: Record<string, string>[] = parse(csv.text, { columns: true, record_delimiter: '\r\n' });
    assert.deepEqual(
      records.map((r) => r.id),
      expected.map((e) => e.id),
    );
    const ndjson = await exportOf(acme.key, `format=ndjson&${query}`);
    assert.deepEqual(
      ndjson.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
      expected.map((e) => e.id),
    );
    // The other tenant's export of the same filter is empty, and its own holds only its entries.
    assert.equal((await exportOf(other.key, `format=ndjson&actor_id=${bot.id}`)).text, '');
    const theirs = await exportOf(other.key, 'format=ndjson&action=note.created');
    assert.deepEqual(
      theirs.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).resource_id)
        .sort(),
      [...otherNotes].sort(),
    );
  });

  it('answers a bad request or a caller without admin on audit with a JSON error', async () => {
    // Raw: queries the document refuses (no format, an unknown one).
    const bad = async (query: string, field: string) => {
      const res = await stack.api('GET', `/api/v1/audit-log/export${query}`, { key: acme.key });
      assertError(res, 400);
      assert.deepEqual(violations(res), [field], query);
    };
    await bad('', 'format');
    await bad('?format=xml', 'format');
    await bad('?format=csv&from=last-week', 'from');
    await bad('?format=csv&from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'to');
    await bad('?format=ndjson&resource_id=42', 'resource_id');
    const inv = await ok(
      stack.client(acme.key).POST('/api/v1/invitations', {
        body: { email: `m-${randomBytes(3).toString('hex')}@acme.test`, name: 'Mo', role: 'member' },
      }),
      201,
    );
    const member = await ok(stack.client().POST('/api/v1/invitations/claim', { body: { code: inv.code! } }));
    const asCsv = { params: { query: { format: 'csv' as const } }, parseAs: 'text' as const };
    await fails(stack.client(member.api_key).GET('/api/v1/audit-log/export', asCsv), 403);
    await fails(stack.client().GET('/api/v1/audit-log/export', asCsv), 401);
  });

  it('is described in the OpenAPI document with both media types', async () => {
    const doc = await stack.api('GET', '/api/v1/openapi.json'); // the document itself is not one of its paths
    const op = doc.body.paths['/api/v1/audit-log/export'].get;
    assert.deepEqual(Object.keys(op.responses['200'].content).sort(), ['application/x-ndjson', 'text/csv']);
    const query = op.parameters.filter((p: { in?: string }) => p.in === 'query'); // headers are $refs
    assert.deepEqual(query.map((p: { name: string }) => p.name).sort(), [
      'action',
      'actor_id',
      'format',
      'from',
      'member_id',
      'resource_id',
      'resource_type',
      'to',
    ]);
  });
});
