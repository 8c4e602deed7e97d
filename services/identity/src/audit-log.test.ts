/**
 * The audit log's filters and its export's batch reader over real gRPC and PostgreSQL. Entries are
 * written straight into audit_log (as identity's consumer writes them), so that actors, resources
 * and times are known; two tenants share every actor id, resource id and time, so a filter that
 * forgot the tenant would show the other's entries.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createPool, newId, type Pool } from '@workauto/db';
import {
  AuditLogExportFormat as F,
  IdentityServiceService as S,
} from '@workauto/protos/workauto/identity/v1/identity.js';
import { parse } from 'csv-parse/sync';
import { auditEntryJson } from './domain/audit-export.js';
import { auditLogBatches, insertAuditEntry, type AuditFilter, type AuditRow } from './repo/audit-log.js';
import { as, failure, startIdentity } from './test-support.js';

const T0 = Date.parse('2026-03-01T08:00:00Z');
const minute = (n: number) => new Date(T0 + n * 60_000);
const ACTIONS = ['note.created', 'note.updated', 'member.updated', 'task.created'];
const ACTORS = [randomUUID(), randomUUID(), 'system'];
/** The members holding the first two actors (API keys); the system has none. */
const MEMBERS = [randomUUID(), randomUUID(), null];
const RESOURCES = Array.from({ length: 5 }, () => randomUUID());

/** 40 entries of a tenant: every action, actor and resource, two entries per minute (ties broken by id). */
function entriesOf(tenantId: string): AuditRow[] {
  return Array.from({ length: 40 }, (_, i) => {
    const action = ACTIONS[i % ACTIONS.length]!;
    return {
      id: newId(),
      tenant_id: tenantId,
      action,
      actor_id: ACTORS[i % ACTORS.length]!,
      actor_type: i % 3 === 2 ? 'system' : 'api_key',
      member_id: MEMBERS[i % MEMBERS.length]!,
      resource_type: action.split('.')[0]!,
      resource_id: RESOURCES[i % RESOURCES.length]!,
      ip_address: '203.0.113.9',
      user_agent: 'audit-test/1',
      metadata: { i },
      created_at: minute(Math.floor(i / 2)),
    };
  });
}

const newestFirst = (a: AuditRow, b: AuditRow) =>
  b.created_at.getTime() - a.created_at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

/** What a filter must return, worked out here rather than by SQL. */
function matching(entries: AuditRow[], f: AuditFilter): AuditRow[] {
  return entries
    .filter(
      (e) =>
        (f.action === undefined || e.action === f.action) &&
        (f.resource_type === undefined || e.resource_type === f.resource_type) &&
        (f.actor_id === undefined || e.actor_id === f.actor_id) &&
        (f.member_id === undefined || e.member_id === f.member_id) &&
        (f.resource_id === undefined || e.resource_id === f.resource_id) &&
        (f.from === undefined || e.created_at >= f.from) &&
        (f.to === undefined || e.created_at < f.to),
    )
    .sort(newestFirst);
}

describe('audit log filters and export batches', () => {
  let identity: Awaited<ReturnType<typeof startIdentity>>;
  let pool: Pool;
  const tenant = randomUUID();
  const other = randomUUID();
  const mine = entriesOf(tenant);
  const ctx = as(tenant, randomUUID());
  const list = (req: Record<string, unknown>) => identity.client.call(S.listAuditLog, { limit: 200, ...req }, ctx);

  before(async () => {
    identity = await startIdentity();
    pool = createPool(identity.databaseUrl);
    for (const e of [...mine, ...entriesOf(other)]) await insertAuditEntry(pool, e);
  });
  after(async () => {
    await pool?.end();
    await identity?.stop();
  });

  const filters: [string, AuditFilter][] = [
    ['no filter', {}],
    ['action', { action: 'note.updated' }],
    ['resource_type', { resource_type: 'note' }],
    ['actor_id', { actor_id: ACTORS[1] }],
    ['actor_id system', { actor_id: 'system' }],
    ['member_id', { member_id: MEMBERS[0]! }],
    ['resource_id', { resource_id: RESOURCES[2] }],
    ['from', { from: minute(15) }],
    ['to', { to: minute(4) }],
    ['from and to', { from: minute(5), to: minute(10) }],
    ['action, actor and window', { action: 'note.created', actor_id: ACTORS[0], from: minute(2), to: minute(18) }],
    ['resource type and id', { resource_type: 'note', resource_id: RESOURCES[1] }],
    ['actor and resource', { actor_id: ACTORS[2], resource_id: RESOURCES[4] }],
    [
      'all six',
      {
        action: 'task.created',
        resource_type: 'task',
        actor_id: ACTORS[0],
        resource_id: RESOURCES[3],
        from: minute(0),
        to: minute(20),
      },
    ],
    ['nothing matches', { action: 'note.created', resource_type: 'member' }],
  ];

  it('lists exactly the entries of each filter, alone and combined, newest first and only the tenant’s', async () => {
    for (const [name, f] of filters) {
      const expected = matching(mine, f);
      const page = await list({ ...f });
      assert.deepEqual(
        page.data.map((e) => e.id),
        expected.map((e) => e.id),
        name,
      );
      assert.ok(
        page.data.every((e) => e.tenant_id === tenant),
        `${name}: no entry of another tenant`,
      );
      assert.equal(page.has_more, false, name);
    }
    // The filters do narrow: each alone leaves out some entries, the combined ones more.
    assert.equal(matching(mine, { actor_id: ACTORS[1] }).length, 13);
    assert.equal(matching(mine, { resource_id: RESOURCES[2] }).length, 8);
    assert.ok(matching(mine, filters[10]![1]).length > 0 && matching(mine, filters[13]![1]).length > 0);
    assert.equal(matching(mine, { member_id: MEMBERS[0]! }).length, 14);
  });

  it('takes from as inclusive and to as exclusive', async () => {
    const window = await list({ from: minute(5), to: minute(10) });
    const minutes = new Set(window.data.map((e) => (e.created_at!.getTime() - T0) / 60_000));
    assert.deepEqual(
      [...minutes].sort((a, b) => a - b),
      [5, 6, 7, 8, 9],
    );
    // Entries exactly at from are in; exactly at to are out (the next window starts there).
    const next = await list({ from: minute(10), to: minute(11) });
    assert.deepEqual(
      next.data.map((e) => e.created_at!.getTime()),
      [minute(10).getTime(), minute(10).getTime()],
    );
  });

  it('pages through a filtered list without losing or repeating an entry, ties included', async () => {
    for (const f of [
      { actor_id: ACTORS[0] },
      { resource_type: 'note', from: minute(3) },
      { resource_id: RESOURCES[0] },
    ]) {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await identity.client.call(S.listAuditLog, { ...f, limit: 3, ...(cursor ? { cursor } : {}) }, ctx);
        assert.ok(page.data.length <= 3);
        seen.push(...page.data.map((e) => e.id));
        cursor = page.has_more ? page.next_cursor : undefined;
      } while (cursor);
      assert.deepEqual(
        seen,
        matching(mine, f).map((e) => e.id),
        JSON.stringify(f),
      );
    }
  });

  it('refuses a bad filter with a 400 naming the field', async () => {
    const bad = async (req: Record<string, unknown>) => {
      const err = await failure(list(req));
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(req));
      return err.fieldViolations.map((v) => v.field);
    };
    assert.deepEqual(await bad({ from: minute(5), to: minute(5) }), ['to']);
    assert.deepEqual(await bad({ from: minute(6), to: minute(5) }), ['to']);
    assert.deepEqual(await bad({ resource_id: 'note-1' }), ['resource_id']);
    assert.deepEqual(await bad({ resource_id: '' }), ['resource_id']);
    assert.deepEqual(await bad({ member_id: 'wes' }), ['member_id']);
    assert.deepEqual(await bad({ actor_id: 'x'.repeat(201), action: '' }), ['action', 'actor_id']);
    const err = await failure(list({ from: minute(6), to: minute(5) }));
    assert.match(err.fieldViolations[0]!.description, /after from/);
    // An upper-case resource id finds the entries all the same.
    assert.equal((await list({ resource_id: RESOURCES[2]!.toUpperCase() })).data.length, 8);
  });

  it('reads an export oldest first in bounded batches, filtered and only the tenant’s', async () => {
    for (const [name, f] of filters) {
      const ids: string[] = [];
      for await (const batch of auditLogBatches(pool, tenant, f, 4)) {
        assert.ok(batch.length > 0 && batch.length <= 4, `${name}: a batch holds 1 to 4 rows`);
        ids.push(...batch.map((e) => e.id));
      }
      assert.deepEqual(
        ids,
        matching(mine, f)
          .reverse()
          .map((e) => e.id),
        name,
      );
    }
  });

  it('exports every matching entry oldest first over several batches and chunks, in both formats', async () => {
    // 1,200 entries with some weight: three reads of 500 and several chunks of 128 KiB.
    const big = randomUUID();
    const entries = Array.from({ length: 1_200 }, (_, i) => ({
      ...entriesOf(big)[i % 40]!,
      id: newId(),
      created_at: new Date(T0 + i * 1_000),
      metadata: { i, text: `line ${i}, with "quotes"\nand a break `.repeat(8) },
    }));
    for (const e of entries) await insertAuditEntry(pool, e);
    const exportAs = async (tenantId: string, req: Record<string, unknown>) => {
      const chunks = [];
      for await (const c of identity.client.stream(
        S.exportAuditLog,
        { format: F.AUDIT_LOG_EXPORT_FORMAT_NDJSON, ...req },
        as(tenantId, randomUUID()),
      ))
        chunks.push(c);
      return {
        types: new Set(chunks.map((c) => c.content_type)),
        count: chunks.length,
        text: Buffer.concat(chunks.map((c) => c.data)).toString(),
      };
    };
    const ndjson = await exportAs(big, {});
    assert.deepEqual([...ndjson.types], ['application/x-ndjson']);
    assert.ok(ndjson.count > 3, `streamed in chunks, got ${ndjson.count}`);
    const lines = ndjson.text.split('\n');
    assert.equal(lines.pop(), '');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l)),
      entries.map(auditEntryJson),
      'every entry, oldest first, in the list’s JSON shape',
    );

    const f: AuditFilter = {
      actor_id: ACTORS[0],
      resource_type: 'note',
      from: new Date(T0 + 100_000),
      to: new Date(T0 + 1_000_000),
    };
    const csv = await exportAs(big, { ...f, format: F.AUDIT_LOG_EXPORT_FORMAT_CSV });
    assert.deepEqual([...csv.types], ['text/csv; charset=utf-8']);
    const records: Record<string, string>[] = parse(csv.text, { columns: true, record_delimiter: '\r\n' });
    const expected = matching(entries, f).reverse();
    assert.ok(expected.length > 100);
    assert.deepEqual(
      records.map((r) => r.id),
      expected.map((e) => e.id),
    );
    assert.deepEqual(JSON.parse(records[0]!.metadata!), expected[0]!.metadata);

    // Nothing of another tenant, and an export with no match still says what it is.
    assert.equal((await exportAs(tenant, {})).text.split('\n').length - 1, mine.length);
    const none = await exportAs(big, { action: 'nothing.matches' });
    assert.deepEqual([none.text, [...none.types]], ['', ['application/x-ndjson']]);
    const header = await exportAs(big, { action: 'nothing.matches', format: F.AUDIT_LOG_EXPORT_FORMAT_CSV });
    assert.equal(
      header.text,
      'id,tenant_id,action,actor_id,actor_type,created_at,metadata,ip_address,resource_id,resource_type,user_agent,member_id\r\n',
    );
  });

  it('refuses a bad export request before sending anything', async () => {
    const err = await failure(
      (async () => {
        for await (const _ of identity.client.stream(
          S.exportAuditLog,
          { format: F.AUDIT_LOG_EXPORT_FORMAT_UNSPECIFIED, from: minute(2), to: minute(1) },
          ctx,
        ))
          assert.fail('no chunk before the request is checked');
      })(),
    );
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(
      err.fieldViolations.map((v) => v.field),
      ['format', 'to'],
    );
  });
});
