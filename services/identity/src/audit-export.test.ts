/** The export's file formats, read back by a real CSV parser (csv-parse) and JSON.parse. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'csv-parse/sync';
import {
  AUDIT_EXPORT_COLUMNS,
  auditEntryJson,
  csvField,
  csvHeader,
  csvRow,
  ndjsonLine,
  type AuditEntryRow,
} from './domain/audit-export.js';

const row = (over: Partial<AuditEntryRow> = {}): AuditEntryRow => ({
  id: '0193a1b2-0000-7000-8000-000000000001',
  tenant_id: '0193a1b2-0000-7000-8000-0000000000aa',
  action: 'member.updated',
  actor_id: 'system',
  actor_type: 'system',
  resource_type: 'member',
  resource_id: '0193a1b2-0000-7000-8000-0000000000bb',
  ip_address: '203.0.113.7',
  user_agent: 'curl/8.5',
  metadata: { name: 'Ada' },
  created_at: new Date('2026-03-01T08:00:00.123Z'),
  member_id: '0193a1b2-0000-7000-8000-0000000000cc',
  ...over,
});

// Values a CSV writer gets wrong: separators, quotes, both line breaks, non-ASCII, nested JSON.
const awkward = row({
  user_agent: 'Mozilla/5.0 (X11; "quoted", comma)\r\nsecond line\nthird',
  metadata: { note: 'a,b "c"\nd', nested: { list: [1, 'x,y', null], deep: { ok: true } }, emoji: 'é😀' },
  ip_address: null,
  resource_id: null,
  resource_type: null,
});

describe('audit export formats', () => {
  it('maps an entry to the list’s JSON shape: microsecond RFC 3339 time, absent fields null', () => {
    const json = auditEntryJson(awkward);
    assert.deepEqual(Object.keys(json), [...AUDIT_EXPORT_COLUMNS]);
    assert.equal(json.created_at, '2026-03-01T08:00:00.123000Z');
    assert.equal(json.ip_address, null);
    assert.equal(json.resource_id, null);
    assert.deepEqual(json.metadata, awkward.metadata);
    assert.equal(
      auditEntryJson(row({ created_at: new Date('1999-12-31T23:59:59.999Z') })).created_at,
      '1999-12-31T23:59:59.999000Z',
    );
  });

  it('writes NDJSON as one parseable object per line, line breaks inside values escaped', () => {
    const text = [row(), awkward, row({ metadata: {} })].map((r) => ndjsonLine(auditEntryJson(r))).join('');
    const lines = text.split('\n');
    assert.equal(lines.pop(), '', 'the file ends with a newline');
    assert.equal(lines.length, 3);
    assert.deepEqual(JSON.parse(lines[1]!), auditEntryJson(awkward));
    assert.deepEqual(JSON.parse(lines[2]!).metadata, {});
  });

  it('writes CSV that an RFC 4180 parser (csv-parse: quotes and column counts checked) reads back field for field', () => {
    const entries = [row(), awkward, row({ metadata: {}, user_agent: null })];
    const text = csvHeader() + entries.map((r) => csvRow(auditEntryJson(r))).join('');
    const records: Record<string, string>[] = parse(text, { columns: true, record_delimiter: '\r\n' });
    assert.equal(records.length, 3);
    assert.deepEqual(Object.keys(records[0]!), [...AUDIT_EXPORT_COLUMNS]);
    const back = records[1]!;
    assert.equal(back.user_agent, awkward.user_agent);
    assert.deepEqual(JSON.parse(back.metadata!), awkward.metadata, 'metadata is its JSON text in one cell');
    assert.equal(back.created_at, '2026-03-01T08:00:00.123000Z');
    assert.equal(back.ip_address, '', 'null is an empty cell');
    assert.equal(records[2]!.metadata, '{}');
    assert.equal(records[0]!.actor_id, 'system');
  });

  it('quotes only what needs it and keeps spreadsheet formulas inert', () => {
    assert.equal(csvField('plain'), 'plain');
    assert.equal(csvField(null), '');
    assert.equal(csvField('a,b'), '"a,b"');
    assert.equal(csvField('say "hi"'), '"say ""hi"""');
    assert.equal(csvField('two\nlines'), '"two\nlines"');
    assert.equal(csvField({ a: 1 }), '"{""a"":1}"');
    // A user agent is whatever a client sent: a cell that starts like a formula gets a leading '.
    for (const formula of ['=HYPERLINK("http://x")', '+1+1', '-2+3', '@SUM(A1)', '\tTAB'])
      assert.ok(csvField(formula).replace(/^"/, '').startsWith("'"), formula);
    assert.equal(csvField('=1,2'), `"'=1,2"`);
  });
});
