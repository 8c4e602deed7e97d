/**
 * The audit log end to end: a mutation in any service → its outbox → the audit stream (Kafka when
 * the run has a broker, else in-process) → identity's consumer → GET /api/v1/audit-log.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { eventually } from '@workauto/testing';
import { assertError, startTestStack, violations, type TenantFixture, type TestStack } from './harness.js';

interface Entry {
  id: string;
  tenant_id: string;
  action: string;
  actor_id: string;
  actor_type: string;
  resource_type?: string;
  resource_id?: string;
  ip_address?: string;
  user_agent?: string;
  metadata: Record<string, unknown>;
  created_at: string;
}

function auditSuite(name: string, kafka: boolean) {
  describe(
    name,
    { skip: kafka && !process.env.KAFKA_BROKERS ? 'KAFKA_BROKERS is not set (make test starts a broker)' : false },
    () => {
      let stack: TestStack;
      let acme: TenantFixture;
      let other: TenantFixture;
      const log = (key: string, query = '') => stack.api('GET', `/api/v1/audit-log${query}`, { key });

      before(async () => {
        // The test client is the ingress here: X-Forwarded-For is believed only from a trusted proxy.
        stack = await startTestStack({
          gatewayOptions: { rateLimitPerMinute: 100_000, trustedProxies: ['127.0.0.1/32', '::1/128'] },
          ...(kafka ? {} : { kafkaBrokers: undefined }),
        });
        acme = await stack.createTenant('Acme');
        other = await stack.createTenant('Other');
      });
      after(() => stack?.stop());

      it('shows a deactivation with actor, resource, client address and user agent', async () => {
        const inv = await stack.api('POST', '/api/v1/invitations', {
          key: acme.key,
          body: { email: `m-${randomBytes(3).toString('hex')}@acme.test`, name: 'Mia', role: 'member' },
        });
        const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
        const memberId = claimed.body.member.id as string;
        const res = await stack.api('DELETE', `/api/v1/members/${memberId}`, {
          key: acme.key,
          headers: { 'user-agent': 'audit-e2e/1.0', 'x-forwarded-for': '203.0.113.7' },
        });
        assert.equal(res.status, 200);
        const entry = await eventually('member.deactivated is in the audit log', async () => {
          const page = await log(acme.key, '?action=member.deactivated');
          return (page.body.data as Entry[]).find((e) => e.resource_id === memberId);
        });
        assert.equal(entry.actor_type, 'api_key');
        assert.ok(entry.actor_id);
        assert.equal(entry.resource_type, 'member');
        assert.equal(entry.ip_address, '203.0.113.7');
        assert.equal(entry.user_agent, 'audit-e2e/1.0');
        assert.deepEqual(entry.metadata, { is_active: false });
        // The invitation and the claim were audited too, as the actions docs/events.md names. Each
        // event reaches the log on its own (one redelivered after a busy moment comes later than
        // the next), so the log is waited for, not read once.
        const expected = ['tenant.created', 'invitation.created', 'invitation.claimed', 'member.deactivated'];
        let actions = new Set<string>();
        await eventually(
          () => `${expected.join(', ')} in the audit log (it holds ${[...actions].join(', ')})`,
          async () => {
            actions = new Set(((await log(acme.key, '?limit=200')).body.data as Entry[]).map((e) => e.action));
            return expected.every((a) => actions.has(a));
          },
          20_000,
          200,
        );
      });

      it('records mutations of every service, never with a secret', async () => {
        const note = await stack.api('POST', '/api/v1/notes', {
          key: acme.key,
          body: { title: 'Audit me', body: 'hello' },
        });
        assert.equal(note.status, 201);
        const pipeline = await stack.api('POST', '/api/v1/pipelines', {
          key: acme.key,
          body: { name: 'Sales', stages: [{ name: 'Lead', stage_type: 'open' }] },
        });
        assert.equal(pipeline.status, 201, JSON.stringify(pipeline.body));
        const apiKey = await stack.api('POST', '/api/v1/api-keys', { key: acme.key, body: { name: 'robot' } });
        assert.equal(apiKey.status, 201);
        for (const [action, id] of [
          ['note.created', note.body.id],
          ['pipeline.created', pipeline.body.id],
          ['api_key.created', apiKey.body.id],
        ] as const) {
          await eventually(`${action} is in the audit log`, async () => {
            const page = await log(acme.key, `?action=${action}`);
            return (page.body.data as Entry[]).find((e) => e.resource_id === id);
          });
        }
        const all = JSON.stringify((await log(acme.key, '?limit=200')).body);
        assert.ok(!all.includes(apiKey.body.api_key), 'the new API key is not in its audit entry');
        assert.ok(!all.includes(acme.key), 'the caller key is not in the audit log');
      });

      it('filters by action and resource type and pages newest first over 250 events', async () => {
        const created: string[] = [];
        for (let batch = 0; batch < 25; batch++) {
          const notes = await Promise.all(
            Array.from({ length: 10 }, (_, i) =>
              stack.api('POST', '/api/v1/notes', { key: acme.key, body: { title: `n${batch}-${i}` } }),
            ),
          );
          for (const n of notes) {
            assert.equal(n.status, 201);
            created.push(n.body.id);
          }
        }
        await eventually(
          'all 250 note.created entries arrived',
          async () => {
            const page = await log(acme.key, '?action=note.created&resource_type=note&limit=200');
            const cursor = page.body.next_cursor as string | undefined;
            const rest = cursor
              ? (
                  await log(
                    acme.key,
                    `?action=note.created&resource_type=note&limit=200&cursor=${encodeURIComponent(cursor)}`,
                  )
                ).body.data.length
              : 0;
            return page.body.data.length + rest >= 251 ? true : undefined; // 250 here + 1 from the test before
          },
          15_000,
        );
        const seen: Entry[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const page = await log(
            acme.key,
            `?action=note.created&resource_type=note&limit=60${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          assert.equal(page.status, 200);
          assert.ok(page.body.data.length <= 60);
          seen.push(...page.body.data);
          cursor = page.body.has_more ? page.body.next_cursor : undefined;
          pages++;
        } while (cursor);
        assert.equal(pages, 5);
        assert.equal(new Set(seen.map((e) => e.id)).size, seen.length, 'no entry twice across pages');
        for (const id of created)
          assert.ok(
            seen.some((e) => e.resource_id === id),
            `note ${id} has its entry`,
          );
        assert.ok(seen.every((e) => e.action === 'note.created' && e.resource_type === 'note'));
        for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1]!.created_at >= seen[i]!.created_at, 'newest first');
        // A filter that matches nothing, and a limit over the maximum.
        assert.deepEqual((await log(acme.key, '?action=note.created&resource_type=member')).body.data, []);
        const clamped = await log(acme.key, '?limit=500');
        assert.equal(clamped.status, 200);
        assert.equal(clamped.body.data.length, 200, 'a limit over 200 is clamped to 200');
        assert.equal((await log(acme.key, '?limit=0')).status, 400);
        assert.equal((await log(acme.key)).body.data.length, 50, 'limit defaults to 50');
      });

      it('filters by actor, resource and a created_at window given in the query string', async () => {
        const bot = await stack.api('POST', '/api/v1/api-keys', { key: acme.key, body: { name: 'filter-bot' } });
        assert.equal(bot.status, 201);
        const notes: string[] = [];
        for (let i = 0; i < 3; i++) {
          const n = await stack.api('POST', '/api/v1/notes', { key: bot.body.api_key, body: { title: `bot ${i}` } });
          assert.equal(n.status, 201);
          notes.push(n.body.id);
        }
        for (const title of ['first edit', 'second edit'])
          assert.equal(
            (await stack.api('PATCH', `/api/v1/notes/${notes[0]}`, { key: acme.key, body: { title } })).status,
            200,
          );
        const byBot = await eventually('the bot key’s three notes are audited', async () => {
          const page = await log(acme.key, `?actor_id=${bot.body.id}`);
          return page.body.data.length === 3 ? (page.body.data as Entry[]) : undefined;
        });
        assert.deepEqual(
          byBot.map((e) => e.resource_id),
          [...notes].reverse(),
          'only its entries, newest first',
        );
        assert.ok(byBot.every((e) => e.actor_type === 'api_key' && e.action === 'note.created'));
        const history = await eventually('both edits are audited', async () => {
          const page = await log(acme.key, `?resource_id=${notes[0]}`);
          return page.body.data.length === 3 ? (page.body.data as Entry[]) : undefined;
        });
        assert.deepEqual(
          history.map((e) => e.action),
          ['note.updated', 'note.updated', 'note.created'],
        );
        // from inclusive, to exclusive: the window [first, third) holds the first two notes.
        const [third, second, first] = byBot;
        const window = await log(
          acme.key,
          `?actor_id=${bot.body.id}&from=${encodeURIComponent(first!.created_at)}&to=${encodeURIComponent(third!.created_at)}`,
        );
        assert.equal(window.status, 200);
        assert.deepEqual(
          (window.body.data as Entry[]).map((e) => e.id),
          [second!.id, first!.id],
        );
        const combined = await log(
          acme.key,
          `?action=note.updated&resource_type=note&resource_id=${notes[0]}&actor_id=${history[0]!.actor_id}&from=${encodeURIComponent(history[1]!.created_at)}`,
        );
        assert.deepEqual(
          (combined.body.data as Entry[]).map((e) => e.id),
          [history[0]!.id, history[1]!.id],
        );
        // The other tenant's log has none of them, whatever the filter.
        assert.deepEqual((await log(other.key, `?actor_id=${bot.body.id}`)).body.data, []);
        assert.deepEqual((await log(other.key, `?resource_id=${notes[0]}`)).body.data, []);
        // Bad values: a 400 in the API's error shape naming the field.
        const bad = async (query: string, field: string) => {
          const res = await log(acme.key, query);
          assertError(res, 400);
          assert.deepEqual(violations(res), [field], query);
        };
        await bad('?from=yesterday', 'from');
        await bad('?to=2026-13-01T00:00:00Z', 'to');
        await bad(`?from=${encodeURIComponent(first!.created_at)}&to=${encodeURIComponent(first!.created_at)}`, 'to');
        await bad('?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'to');
        await bad('?resource_id=not-a-uuid', 'resource_id');
      });

      it("answers “what did this member do?”: entries made with a member's API keys carry its member_id", async () => {
        // A member with a key of their own, and the owner's key.
        const inv = await stack.api('POST', '/api/v1/invitations', {
          key: acme.key,
          body: { email: `w-${randomBytes(3).toString('hex')}@acme.test`, name: 'Wes', role: 'member' },
        });
        const claimed = await stack.api('POST', '/api/v1/invitations/claim', { body: { code: inv.body.code } });
        const wes = { id: claimed.body.member.id as string, key: claimed.body.api_key as string };
        const byWes = await stack.api('POST', '/api/v1/notes', { key: wes.key, body: { title: 'by Wes' } });
        const byOwner = await stack.api('POST', '/api/v1/notes', { key: acme.key, body: { title: 'by the owner' } });
        assert.equal(byWes.status, 201);
        assert.equal(byOwner.status, 201);
        const entries = await eventually('the note of Wes is audited under his member id', async () => {
          const page = await log(acme.key, `?member_id=${wes.id}&action=note.created`);
          assert.equal(page.status, 200, JSON.stringify(page.body));
          return page.body.data.length ? (page.body.data as (Entry & { member_id: string })[]) : undefined;
        });
        assert.deepEqual(
          entries.map((e) => [e.resource_id, e.actor_type, e.member_id]),
          [[byWes.body.id, 'api_key', wes.id]],
          "the key's id stays the actor; the member is who holds it",
        );
        const owner = await eventually('the owner’s note is audited', async () => {
          const page = await log(acme.key, `?member_id=${acme.ownerId}&resource_id=${byOwner.body.id}`);
          return page.body.data[0] as (Entry & { member_id: string }) | undefined;
        });
        assert.equal(owner.member_id, acme.ownerId);
        const exported = await fetch(`${stack.url}/api/v1/audit-log/export?format=ndjson&member_id=${wes.id}`, {
          headers: { authorization: `Bearer ${acme.key}` },
        });
        assert.equal(exported.status, 200);
        const lines = (await exported.text())
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { action: string; member_id: string });
        assert.ok(lines.length >= 1 && lines.every((l) => l.member_id === wes.id), JSON.stringify(lines));
        assert.ok(lines.some((l) => l.action === 'note.created'));
        assert.deepEqual((await log(other.key, `?member_id=${wes.id}`)).body.data, []);
        assertError(await log(acme.key, '?member_id=wes'), 400);
      });

      it("never shows another tenant's entries", async () => {
        const page = await log(other.key, '?limit=200');
        assert.equal(page.status, 200);
        const entries = page.body.data as Entry[];
        assert.deepEqual(
          [...new Set(entries.map((e) => e.action))].sort(),
          ['api_key.created', 'member.created', 'tenant.created'],
          'only its own bootstrap',
        );
        assert.ok(entries.every((e) => e.tenant_id === other.id));
      });
    },
  );
}

auditSuite('audit log through Kafka', true);
auditSuite('audit log in-process (make dev without KAFKA_BROKERS)', false);
