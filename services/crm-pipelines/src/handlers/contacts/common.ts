import { isUniqueViolation, type PoolClient } from '@workauto/db';
import { errors, type CallContext } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { canonicalize, type ChannelType } from '../../domain/channels.js';
import * as channels from '../../repo/channels.js';
import * as contacts from '../../repo/contacts.js';
import { SOURCE, channelData } from '../common.js';

// What the contact and channel handlers share: canonical values, their uniqueness, the contact's lock.

/** The canonical form of a channel value, or a 400 on the field it names. */
export function canonicalOrThrow(type: ChannelType, value: string, region: string | undefined) {
  const c = canonicalize(type, value, region);
  if (!c.ok) throw errors.invalidField(c.field, c.description);
  return c;
}

/** A write that hit the (tenant, type, canonical_value) unique index is a 409. */
export async function uniqueValue<T>(type: ChannelType, canonical: string, write: () => Promise<T>): Promise<T> {
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

export async function lockContact(tx: PoolClient, tenantId: string, id: string): Promise<contacts.ContactRow> {
  const contact = await contacts.findContact(tx, tenantId, id, { forUpdate: true });
  if (!contact) throw errors.notFound('contact', id);
  return contact;
}

/** Demotes the contact's primary of the type (under the contact's lock) and records that change. */
export async function demote(
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
