import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { ChannelType } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { S, failure, startCrm, tenant } from './test-support.js';

const EMAIL = ChannelType.CHANNEL_TYPE_EMAIL;
const PHONE = ChannelType.CHANNEL_TYPE_PHONE;

describe('contacts and channels over gRPC', () => {
  let crm: Awaited<ReturnType<typeof startCrm>>;
  before(async () => {
    crm = await startCrm();
  });
  after(() => crm.stop());

  it('creates, lists (with a text query on name, company and channel values), patches and soft-deletes contacts', async () => {
    const t = tenant();
    const ann = await crm.client.call(
      S.createContact,
      { name: ' Ann Lee ', company: 'Initech', job_title: 'CTO', metadata: { tier: 1 } },
      t.call,
    );
    assert.deepEqual(
      [ann.name, ann.company, ann.job_title, ann.tenant_id, ann.deleted_at],
      ['Ann Lee', 'Initech', 'CTO', t.id, undefined],
    );
    const bob = await crm.client.call(S.createContact, { name: 'Bob' }, t.call);
    await crm.client.call(
      S.createContactChannel,
      { contact_id: bob.id, type: EMAIL, value: 'Bob.Smith@Globex.example' },
      t.call,
    );
    await crm.client.call(
      S.createContactChannel,
      { contact_id: bob.id, type: PHONE, value: '(213) 373-4253', region: 'US' },
      t.call,
    );
    const q = async (text: string) =>
      (await crm.client.call(S.listContacts, { q: text }, t.call)).data.map((c) => c.name);
    assert.deepEqual(await q('ann'), ['Ann Lee']);
    assert.deepEqual(await q('INITECH'), ['Ann Lee']);
    assert.deepEqual(await q('globex'), ['Bob']);
    assert.deepEqual(await q('2133734253'), ['Bob'], 'matches the canonical phone number');
    assert.deepEqual(await q('%'), [], 'LIKE wildcards match themselves');
    assert.deepEqual(await q(''), ['Bob', 'Ann Lee']);
    const page = await crm.client.call(S.listContacts, { limit: 1 }, t.call);
    assert.equal(page.has_more, true);
    assert.deepEqual(
      (await crm.client.call(S.listContacts, { limit: 1, cursor: page.next_cursor! }, t.call)).data.map((c) => c.name),
      ['Ann Lee'],
    );

    const patched = await crm.client.call(
      S.updateContact,
      { id: ann.id, name: 'Ann Li', company: '', metadata: { tier: 2 } },
      t.call,
    );
    assert.deepEqual(
      [patched.name, patched.company, patched.job_title, patched.metadata],
      ['Ann Li', undefined, 'CTO', { tier: 2 }],
    );
    assert.equal(
      (await failure(crm.client.call(S.createContact, { name: '  ' }, t.call))).fieldViolations[0]?.field,
      'name',
    );
    assert.equal(
      (await failure(crm.client.call(S.updateContact, { id: ann.id, name: 'x'.repeat(201) }, t.call)))
        .fieldViolations[0]?.field,
      'name',
    );

    await crm.client.call(S.deleteContact, { id: bob.id }, t.call);
    assert.equal((await failure(crm.client.call(S.getContact, { id: bob.id }, t.call))).reason, 'CONTACT_NOT_FOUND');
    assert.equal(
      (await failure(crm.client.call(S.listContactChannels, { contact_id: bob.id }, t.call))).code,
      grpc.status.NOT_FOUND,
    );
    assert.deepEqual(await q(''), ['Ann Li']);
    // Its channels went with it: the address is free for another contact.
    const again = await crm.client.call(
      S.createContactChannel,
      { contact_id: ann.id, type: EMAIL, value: 'bob.smith@globex.example' },
      t.call,
    );
    assert.equal(again.canonical_value, 'bob.smith@globex.example');
    const { rows } = await crm.db.query(`SELECT event_type FROM outbox WHERE resource_id = $1 ORDER BY seq`, [bob.id]);
    assert.deepEqual(
      rows.map((r) => r.event_type),
      ['contact.created', 'contact.deleted'],
    );
  });

  it('canonicalises values, rejects invalid ones, and keeps canonical values unique per tenant and type', async () => {
    const t = tenant();
    const c = await crm.client.call(S.createContact, { name: 'C' }, t.call);
    const email = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: EMAIL, value: '  Jane.Doe+crm@Example.COM ', label: 'work' },
      t.call,
    );
    assert.deepEqual(
      [
        email.value,
        email.canonical_value,
        email.key_version,
        email.is_primary,
        email.is_verified,
        email.preference_order,
        email.label,
        email.tenant_id,
        email.contact_id,
      ],
      ['Jane.Doe+crm@Example.COM', 'jane.doe+crm@example.com', 1, true, false, 1, 'work', t.id, c.id],
    );
    const phone = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: PHONE, value: '020 7946 0958', region: 'GB' },
      t.call,
    );
    assert.equal(phone.canonical_value, '+442079460958');
    const bad: [Record<string, unknown>, string][] = [
      [{ type: PHONE, value: '555-0100' }, 'value'],
      [{ type: PHONE, value: '+1 555' }, 'value'],
      [{ type: PHONE, value: '2133734253', region: 'ZZ' }, 'region'],
      [{ type: EMAIL, value: 'jane@' }, 'value'],
      [{ type: ChannelType.CHANNEL_TYPE_URL, value: 'javascript:alert(1)' }, 'value'],
      [{ type: 42, value: 'x' }, 'type'],
      [{ type: EMAIL, value: '' }, 'value'],
    ];
    for (const [body, field] of bad) {
      const err = await failure(
        crm.client.call(S.createContactChannel, { contact_id: c.id, ...body } as never, t.call),
      );
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(body));
      assert.equal(err.fieldViolations[0]?.field, field, JSON.stringify(body));
    }
    const other = await crm.client.call(S.createContact, { name: 'Other' }, t.call);
    const dup = await failure(
      crm.client.call(
        S.createContactChannel,
        { contact_id: other.id, type: EMAIL, value: 'JANE.DOE+CRM@example.com' },
        t.call,
      ),
    );
    assert.equal(dup.code, grpc.status.ALREADY_EXISTS);
    assert.equal(dup.reason, 'CHANNEL_VALUE_TAKEN');
    const dupPhone = await failure(
      crm.client.call(S.createContactChannel, { contact_id: other.id, type: PHONE, value: '+44 20 7946 0958' }, t.call),
    );
    assert.equal(dupPhone.code, grpc.status.ALREADY_EXISTS);
    // The same text as another type, or in another tenant, is fine.
    await crm.client.call(
      S.createContactChannel,
      { contact_id: other.id, type: ChannelType.CHANNEL_TYPE_OTHER, value: 'jane.doe+crm@example.com' },
      t.call,
    );
    const t2 = tenant();
    const c2 = await crm.client.call(S.createContact, { name: 'C' }, t2.call);
    await crm.client.call(
      S.createContactChannel,
      { contact_id: c2.id, type: EMAIL, value: 'jane.doe+crm@example.com' },
      t2.call,
    );
    // Changing a value to a taken one is a 409 too.
    const mine = await crm.client.call(
      S.createContactChannel,
      { contact_id: other.id, type: EMAIL, value: 'other@example.com' },
      t.call,
    );
    assert.equal(
      (
        await failure(
          crm.client.call(
            S.updateContactChannel,
            { contact_id: other.id, channel_id: mine.id, value: 'Jane.Doe+crm@example.com' },
            t.call,
          ),
        )
      ).code,
      grpc.status.ALREADY_EXISTS,
    );
  });

  it('keeps one primary per type (first promoted, new primary demotes, deleting it promotes the next) and a dense preference order', async () => {
    const t = tenant();
    const c = await crm.client.call(S.createContact, { name: 'P' }, t.call);
    const a = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: EMAIL, value: 'a@example.com', is_primary: false },
      t.call,
    );
    assert.equal(a.is_primary, true, 'the first of a type is primary');
    const b = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: EMAIL, value: 'b@example.com' },
      t.call,
    );
    assert.deepEqual([b.is_primary, b.preference_order], [false, 2]);
    const p = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: PHONE, value: '+12133734253' },
      t.call,
    );
    assert.equal(p.is_primary, true, 'primaries are per type');
    const x = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: EMAIL, value: 'x@example.com', is_primary: true, preference_order: 1 },
      t.call,
    );
    assert.deepEqual([x.is_primary, x.preference_order], [true, 1]);
    const list = async () =>
      (await crm.client.call(S.listContactChannels, { contact_id: c.id }, t.call)).data.filter(
        (ch) => ch.type === EMAIL,
      );
    assert.deepEqual(
      (await list()).map((ch) => [ch.value, ch.is_primary, ch.preference_order]),
      [
        ['x@example.com', true, 1],
        ['a@example.com', false, 2],
        ['b@example.com', false, 3],
      ],
    );
    const promoted = await crm.client.call(
      S.updateContactChannel,
      { contact_id: c.id, channel_id: b.id, is_primary: true, preference_order: 1 },
      t.call,
    );
    assert.deepEqual([promoted.is_primary, promoted.preference_order], [true, 1]);
    assert.deepEqual(
      (await list()).map((ch) => [ch.value, ch.is_primary]),
      [
        ['b@example.com', true],
        ['x@example.com', false],
        ['a@example.com', false],
      ],
    );
    const refuse = await failure(
      crm.client.call(S.updateContactChannel, { contact_id: c.id, channel_id: b.id, is_primary: false }, t.call),
    );
    assert.equal(refuse.reason, 'PRIMARY_CHANNEL_REQUIRED');
    await crm.client.call(S.deleteContactChannel, { contact_id: c.id, channel_id: b.id }, t.call);
    assert.deepEqual(
      (await list()).map((ch) => [ch.value, ch.is_primary, ch.preference_order]),
      [
        ['x@example.com', true, 1],
        ['a@example.com', false, 2],
      ],
    );
    assert.equal(
      (await failure(crm.client.call(S.deleteContactChannel, { contact_id: c.id, channel_id: b.id }, t.call))).reason,
      'CONTACT_CHANNEL_NOT_FOUND',
    );
    const { rows } = await crm.db.query(
      `SELECT type, count(*) FILTER (WHERE is_primary)::int AS primaries FROM contact_channels WHERE contact_id = $1 AND deleted_at IS NULL GROUP BY type ORDER BY type`,
      [c.id],
    );
    assert.deepEqual(rows, [
      { type: 'email', primaries: 1 },
      { type: 'phone', primaries: 1 },
    ]);
  });

  it('resets is_verified when the value changes to another address, not when it is rewritten', async () => {
    const t = tenant();
    const c = await crm.client.call(S.createContact, { name: 'V' }, t.call);
    const ch = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: PHONE, value: '+1 213 373 4253', is_verified: true },
      t.call,
    );
    assert.equal(ch.is_verified, true);
    const same = await crm.client.call(
      S.updateContactChannel,
      { contact_id: c.id, channel_id: ch.id, value: '(213) 373-4253', region: 'US', label: 'mobile' },
      t.call,
    );
    assert.deepEqual(
      [same.value, same.canonical_value, same.is_verified, same.label],
      ['(213) 373-4253', '+12133734253', true, 'mobile'],
    );
    const moved = await crm.client.call(
      S.updateContactChannel,
      { contact_id: c.id, channel_id: ch.id, value: '+44 20 7946 0958' },
      t.call,
    );
    assert.deepEqual([moved.canonical_value, moved.is_verified, moved.key_version], ['+442079460958', false, 1]);
    const bad = await failure(
      crm.client.call(S.updateContactChannel, { contact_id: c.id, channel_id: ch.id, value: '12' }, t.call),
    );
    assert.equal(bad.fieldViolations[0]?.field, 'value');
    assert.equal(
      (
        await failure(
          crm.client.call(S.updateContactChannel, { contact_id: c.id, channel_id: ch.id, region: 'US' }, t.call),
        )
      ).fieldViolations[0]?.field,
      'region',
    );
  });

  it('ends 20 parallel "set as primary" calls with exactly one primary', async () => {
    const t = tenant();
    const c = await crm.client.call(S.createContact, { name: 'Race' }, t.call);
    const chans = [];
    for (let i = 0; i < 20; i++)
      chans.push(
        await crm.client.call(
          S.createContactChannel,
          { contact_id: c.id, type: EMAIL, value: `r${i}@example.com` },
          t.call,
        ),
      );
    const results = await Promise.allSettled(
      chans.map((ch) =>
        crm.client.call(S.updateContactChannel, { contact_id: c.id, channel_id: ch.id, is_primary: true }, t.call),
      ),
    );
    assert.deepEqual(
      results.filter((r) => r.status === 'rejected'),
      [],
    );
    const list = (await crm.client.call(S.listContactChannels, { contact_id: c.id }, t.call)).data;
    assert.equal(list.filter((ch) => ch.is_primary).length, 1);
    assert.deepEqual(
      list.map((ch) => ch.preference_order),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
  });

  it('keeps tenants apart on every by-id rpc', async () => {
    const owner = tenant();
    const other = tenant();
    const c = await crm.client.call(S.createContact, { name: 'Secret' }, owner.call);
    const ch = await crm.client.call(
      S.createContactChannel,
      { contact_id: c.id, type: EMAIL, value: 'secret@example.com' },
      owner.call,
    );
    const calls = [
      () => crm.client.call(S.getContact, { id: c.id }, other.call),
      () => crm.client.call(S.updateContact, { id: c.id, name: 'x' }, other.call),
      () => crm.client.call(S.deleteContact, { id: c.id }, other.call),
      () =>
        crm.client.call(S.createContactChannel, { contact_id: c.id, type: EMAIL, value: 'y@example.com' }, other.call),
      () => crm.client.call(S.listContactChannels, { contact_id: c.id }, other.call),
      () => crm.client.call(S.updateContactChannel, { contact_id: c.id, channel_id: ch.id, label: 'x' }, other.call),
      () => crm.client.call(S.deleteContactChannel, { contact_id: c.id, channel_id: ch.id }, other.call),
    ];
    for (const call of calls) assert.equal((await failure(call())).code, grpc.status.NOT_FOUND);
    assert.deepEqual((await crm.client.call(S.listContacts, { q: 'secret' }, other.call)).data, []);
    // A channel id under another contact of the same tenant is not found either.
    const c2 = await crm.client.call(S.createContact, { name: 'Two' }, owner.call);
    assert.equal(
      (
        await failure(
          crm.client.call(S.updateContactChannel, { contact_id: c2.id, channel_id: ch.id, label: 'x' }, owner.call),
        )
      ).code,
      grpc.status.NOT_FOUND,
    );
    assert.equal((await crm.client.call(S.listContactChannels, { contact_id: c.id }, owner.call)).data.length, 1);
  });
});
