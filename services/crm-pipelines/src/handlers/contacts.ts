import { isUniqueViolation, newId, withTransaction, type PoolClient } from '@workauto/db';
import {
  errors,
  parsePage,
  toPage,
  validate,
  type CallContext,
  type Handlers,
  patchNulls,
  changedFields,
  checkEnum,
  checkMetadata,
  textOrNull,
} from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import type { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { canonicalize, type ChannelType } from '../domain/channels.js';
import { moveTo } from '../domain/ordering.js';
import * as channels from '../repo/channels.js';
import * as contacts from '../repo/contacts.js';
import {
  LIMITS,
  SOURCE,
  channelTypes,
  toChannel,
  toContact,
  channelData,
  contactData,
  type CrmDeps,
} from './common.js';
import { checkPosition } from './validation.js';

type H = Handlers<typeof CrmPipelinesServiceService>;

function canonicalOrThrow(type: ChannelType, value: string, region: string | undefined) {
  const c = canonicalize(type, value, region);
  if (!c.ok) throw errors.invalidField(c.field, c.description);
  return c;
}

/** A write that hit the (tenant, type, canonical_value) unique index is a 409. */
async function uniqueValue<T>(type: ChannelType, canonical: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err, channels.CANONICAL_INDEX)) {
      throw errors.alreadyExists(
        'CHANNEL_VALUE_TAKEN',
        `a ${type} channel with the value ${canonical} already exists in this tenant`,
        { canonical_value: canonical },
      );
    }
    throw err;
  }
}

async function lockContact(tx: PoolClient, tenantId: string, id: string): Promise<contacts.ContactRow> {
  const contact = await contacts.findContact(tx, tenantId, id, { forUpdate: true });
  if (!contact) throw errors.notFound('contact', id);
  return contact;
}

/** Demotes the contact's primary of the type (under the contact's lock) and records that change. */
async function demote(
  tx: PoolClient,
  ctx: CallContext,
  tenantId: string,
  contactId: string,
  type: ChannelType,
): Promise<void> {
  const demoted = await channels.demotePrimary(tx, tenantId, contactId, type);
  if (demoted) {
    await recordEvent(tx, SOURCE, ctx, {
      type: 'contact_channel.updated',
      resourceType: 'contact_channel',
      resourceId: demoted.id,
      parent: { type: 'contact', id: demoted.contact_id },
      data: channelData(demoted),
      metadata: { is_primary: false },
    });
  }
}

export function contactHandlers({
  pool,
}: CrmDeps): Pick<
  H,
  | 'createContact'
  | 'listContacts'
  | 'getContact'
  | 'updateContact'
  | 'deleteContact'
  | 'createContactChannel'
  | 'listContactChannels'
  | 'updateContactChannel'
  | 'deleteContactChannel'
> {
  return {
    async createContact(req, ctx) {
      const v = validate()
        .text('name', req.name, { required: true, max: LIMITS.name })
        .text('company', req.company, { min: 0, max: LIMITS.name })
        .text('job_title', req.job_title, { min: 0, max: LIMITS.name });
      checkMetadata(v, 'metadata', req.metadata).done();
      return withTransaction(
        pool,
        async (tx) => {
          const row = await contacts.insertContact(tx, {
            id: newId(),
            tenant_id: ctx.tenant,
            name: req.name.trim(),
            company: textOrNull(req.company) ?? null,
            job_title: textOrNull(req.job_title) ?? null,
            metadata: req.metadata ?? {},
          });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact.created',
            resourceType: 'contact',
            resourceId: row.id,
            data: contactData(row),
          });
          return toContact(row);
        },
        { signal: ctx.signal },
      );
    },

    async listContacts(req, ctx) {
      validate().text('q', req.q, { min: 0, max: LIMITS.query }).done();
      const page = parsePage(req);
      const q = req.q?.trim() || undefined;
      return toPage(await contacts.listContacts(pool, ctx.tenant, q, page), toContact);
    },

    async getContact(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      const row = await contacts.findContact(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('contact', req.id);
      return toContact(row);
    },

    async updateContact(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['company', 'job_title'] }, v);
      v.uuid('id', req.id, { required: true })
        .text('name', req.name, { max: LIMITS.name })
        .text('company', req.company, { min: 0, max: LIMITS.name })
        .text('job_title', req.job_title, { min: 0, max: LIMITS.name });
      checkMetadata(v, 'metadata', req.metadata).done();
      return withTransaction(
        pool,
        async (tx) => {
          const current = await lockContact(tx, ctx.tenant, req.id);
          const patch = {
            name: req.name?.trim(),
            company: textOrNull(req.company),
            job_title: textOrNull(req.job_title),
            metadata: req.metadata,
          };
          const updated = await contacts.updateContact(tx, ctx.tenant, current.id, patch);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact.updated',
            resourceType: 'contact',
            resourceId: updated.id,
            data: contactData(updated),
            metadata: changedFields(patch),
          });
          return toContact(updated);
        },
        { signal: ctx.signal },
      );
    },

    async deleteContact(req, ctx) {
      validate().uuid('id', req.id, { required: true }).done();
      return withTransaction(
        pool,
        async (tx) => {
          const current = await lockContact(tx, ctx.tenant, req.id);
          // Its channels go with it, so their values can be used by another contact.
          for (const ch of await channels.deleteChannelsOf(tx, ctx.tenant, current.id)) {
            await recordEvent(tx, SOURCE, ctx, {
              type: 'contact_channel.deleted',
              resourceType: 'contact_channel',
              resourceId: ch.id,
              parent: { type: 'contact', id: ch.contact_id },
              data: channelData(ch),
            });
          }
          const deleted = await contacts.updateContact(tx, ctx.tenant, current.id, { deleted_at: new Date() });
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact.deleted',
            resourceType: 'contact',
            resourceId: deleted.id,
            data: contactData(deleted),
            metadata: { deleted_at: deleted.deleted_at },
          });
          return {};
        },
        { signal: ctx.signal },
      );
    },

    async createContactChannel(req, ctx) {
      const v = validate()
        .uuid('contact_id', req.contact_id, { required: true })
        .text('value', req.value, { required: true, max: LIMITS.value })
        .text('label', req.label, { min: 0, max: LIMITS.label });
      checkEnum(v, 'type', req.type, channelTypes, true);
      checkPosition(v, 'preference_order', req.preference_order);
      checkMetadata(v, 'metadata', req.metadata).done();
      const type = channelTypes.toDomain(req.type) as ChannelType;
      const canonical = canonicalOrThrow(type, req.value, req.region);
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          // The contact's row lock serialises every change to its channels (primary flag, order).
          const contact = await lockContact(tx, tenantId, req.contact_id);
          const all = await channels.listChannels(tx, tenantId, contact.id);
          if (all.length >= LIMITS.channelsPerContact)
            throw errors.failedPrecondition(
              'TOO_MANY_CHANNELS',
              `a contact has at most ${LIMITS.channelsPerContact} channels`,
            );
          const siblings = all.filter((c) => c.type === type);
          // The first channel of a type is its primary; a later one only when asked.
          const isPrimary = siblings.length === 0 || req.is_primary === true;
          if (isPrimary && siblings.length > 0) await demote(tx, ctx, tenantId, contact.id, type);
          let row = await uniqueValue(type, canonical.canonical, () =>
            channels.insertChannel(tx, {
              id: newId(),
              tenant_id: tenantId,
              contact_id: contact.id,
              type,
              value: req.value.trim(),
              canonical_value: canonical.canonical,
              key_version: canonical.keyVersion,
              label: textOrNull(req.label) ?? null,
              is_primary: isPrimary,
              is_verified: req.is_verified ?? false,
              preference_order: siblings.length + 1,
              metadata: req.metadata ?? {},
            }),
          );
          if (req.preference_order !== undefined && req.preference_order <= siblings.length) {
            await channels.setPreferenceOrder(
              tx,
              tenantId,
              moveTo([...siblings.map((c) => c.id), row.id], row.id, req.preference_order),
            );
            row = (await channels.findChannel(tx, tenantId, contact.id, row.id))!;
          }
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact_channel.created',
            resourceType: 'contact_channel',
            resourceId: row.id,
            parent: { type: 'contact', id: row.contact_id },
            data: channelData(row),
          });
          return toChannel(row);
        },
        { signal: ctx.signal },
      );
    },

    async listContactChannels(req, ctx) {
      validate().uuid('contact_id', req.contact_id, { required: true }).done();
      const contact = await contacts.findContact(pool, ctx.tenant, req.contact_id);
      if (!contact) throw errors.notFound('contact', req.contact_id);
      return { data: (await channels.listChannels(pool, ctx.tenant, contact.id)).map(toChannel) };
    },

    async updateContactChannel(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['label'], other: ['region'] }, v);
      v.uuid('contact_id', req.contact_id, { required: true })
        .uuid('channel_id', req.channel_id, { required: true })
        .text('value', req.value, { max: LIMITS.value })
        .text('label', req.label, { min: 0, max: LIMITS.label })
        .check(req.region === undefined || req.value !== undefined, 'region', 'is used only together with value');
      checkPosition(v, 'preference_order', req.preference_order);
      checkMetadata(v, 'metadata', req.metadata).done();
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          const contact = await lockContact(tx, tenantId, req.contact_id);
          const current = await channels.findChannel(tx, tenantId, contact.id, req.channel_id);
          if (!current) throw errors.notFound('contact_channel', req.channel_id);
          if (req.is_primary === false && current.is_primary) {
            throw errors.failedPrecondition(
              'PRIMARY_CHANNEL_REQUIRED',
              `a contact keeps one primary ${current.type} channel: make another one primary instead`,
            );
          }
          const canonical = req.value === undefined ? undefined : canonicalOrThrow(current.type, req.value, req.region);
          // A new address is not verified, whatever the old one was; the same address rewritten keeps its state.
          const newAddress = canonical !== undefined && canonical.canonical !== current.canonical_value;
          const promote = req.is_primary === true && !current.is_primary;
          if (promote) await demote(tx, ctx, tenantId, contact.id, current.type);
          if (req.preference_order !== undefined) {
            const ids = (await channels.listChannels(tx, tenantId, contact.id, current.type)).map((c) => c.id);
            await channels.setPreferenceOrder(tx, tenantId, moveTo(ids, current.id, req.preference_order));
          }
          const patch = {
            value: req.value?.trim(),
            canonical_value: canonical?.canonical,
            key_version: canonical?.keyVersion,
            label: textOrNull(req.label),
            is_primary: promote ? true : undefined,
            is_verified: req.is_verified ?? (newAddress ? false : undefined),
            metadata: req.metadata,
          };
          const updated = await uniqueValue(current.type, canonical?.canonical ?? current.canonical_value, () =>
            channels.updateChannel(tx, tenantId, current.id, patch),
          );
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact_channel.updated',
            resourceType: 'contact_channel',
            resourceId: updated.id,
            parent: { type: 'contact', id: updated.contact_id },
            data: channelData(updated),
            metadata: changedFields({ ...patch, preference_order: req.preference_order }),
          });
          return toChannel(updated);
        },
        { signal: ctx.signal },
      );
    },

    async deleteContactChannel(req, ctx) {
      validate()
        .uuid('contact_id', req.contact_id, { required: true })
        .uuid('channel_id', req.channel_id, { required: true })
        .done();
      const tenantId = ctx.tenant;
      return withTransaction(
        pool,
        async (tx) => {
          const contact = await lockContact(tx, tenantId, req.contact_id);
          const current = await channels.findChannel(tx, tenantId, contact.id, req.channel_id);
          if (!current) throw errors.notFound('contact_channel', req.channel_id);
          const deleted = await channels.updateChannel(tx, tenantId, current.id, {
            deleted_at: new Date(),
            is_primary: false,
          });
          const rest = await channels.listChannels(tx, tenantId, contact.id, current.type);
          await channels.setPreferenceOrder(
            tx,
            tenantId,
            rest.map((c) => c.id),
          );
          if (current.is_primary && rest[0]) {
            // The type keeps a primary: the next channel by preference.
            const promoted = await channels.updateChannel(tx, tenantId, rest[0].id, { is_primary: true });
            await recordEvent(tx, SOURCE, ctx, {
              type: 'contact_channel.updated',
              resourceType: 'contact_channel',
              resourceId: promoted.id,
              parent: { type: 'contact', id: promoted.contact_id },
              data: channelData(promoted),
              metadata: { is_primary: true },
            });
          }
          await recordEvent(tx, SOURCE, ctx, {
            type: 'contact_channel.deleted',
            resourceType: 'contact_channel',
            resourceId: deleted.id,
            parent: { type: 'contact', id: deleted.contact_id },
            data: channelData(deleted),
          });
          return {};
        },
        { signal: ctx.signal },
      );
    },
  };
}
