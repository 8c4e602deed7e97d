import { updateTenantRow, type Columns } from '@workauto/db';
import type { Queryable } from '@workauto/db';
import type { ChannelType } from '../domain/channels.js';

export interface ChannelRow {
  id: string;
  tenant_id: string;
  contact_id: string;
  type: ChannelType;
  value: string;
  canonical_value: string;
  key_version: number;
  label: string | null;
  is_primary: boolean;
  is_verified: boolean;
  preference_order: number;
  metadata: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS =
  'id, tenant_id, contact_id, type, value, canonical_value, key_version, label, is_primary, is_verified, preference_order, metadata, created_at, updated_at';

/** Names of the unique indexes, to tell a duplicate value from a second primary. */
export const CANONICAL_INDEX = 'contact_channels_canonical';

export async function insertChannel(
  db: Queryable,
  c: Pick<
    ChannelRow,
    | 'id'
    | 'tenant_id'
    | 'contact_id'
    | 'type'
    | 'value'
    | 'canonical_value'
    | 'key_version'
    | 'label'
    | 'is_primary'
    | 'is_verified'
    | 'preference_order'
    | 'metadata'
  >,
): Promise<ChannelRow> {
  const { rows } = await db.query<ChannelRow>(
    `INSERT INTO contact_channels (id, tenant_id, contact_id, type, value, canonical_value, key_version, label, is_primary, is_verified, preference_order, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING ${COLUMNS}`,
    [
      c.id,
      c.tenant_id,
      c.contact_id,
      c.type,
      c.value,
      c.canonical_value,
      c.key_version,
      c.label,
      c.is_primary,
      c.is_verified,
      c.preference_order,
      c.metadata,
    ],
  );
  return rows[0]!;
}

export async function findChannel(
  db: Queryable,
  tenantId: string,
  contactId: string,
  id: string,
): Promise<ChannelRow | undefined> {
  const { rows } = await db.query<ChannelRow>(
    `SELECT ${COLUMNS} FROM contact_channels WHERE tenant_id = $1 AND contact_id = $2 AND id = $3 AND deleted_at IS NULL`,
    [tenantId, contactId, id],
  );
  return rows[0];
}

/** The contact's live channels by type, then preference order. */
export async function listChannels(
  db: Queryable,
  tenantId: string,
  contactId: string,
  type?: ChannelType,
): Promise<ChannelRow[]> {
  const { rows } = await db.query<ChannelRow>(
    `SELECT ${COLUMNS} FROM contact_channels
      WHERE tenant_id = $1 AND contact_id = $2 AND deleted_at IS NULL AND ($3::text IS NULL OR type = $3)
      ORDER BY type, preference_order, id`,
    [tenantId, contactId, type ?? null],
  );
  return rows;
}

/** Clears the primary flag of the contact's channel of this type; returns the demoted channel. */
export async function demotePrimary(
  db: Queryable,
  tenantId: string,
  contactId: string,
  type: ChannelType,
): Promise<ChannelRow | undefined> {
  const { rows } = await db.query<ChannelRow>(
    `UPDATE contact_channels SET is_primary = false, updated_at = now()
      WHERE tenant_id = $1 AND contact_id = $2 AND type = $3 AND is_primary AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, contactId, type],
  );
  return rows[0];
}

export type ChannelPatch = Partial<
  Pick<ChannelRow, 'value' | 'canonical_value' | 'key_version' | 'label' | 'is_primary' | 'is_verified' | 'metadata'>
> & { deleted_at?: Date };
const PATCH: Columns<ChannelPatch> = {
  value: true,
  canonical_value: true,
  key_version: true,
  label: true,
  is_primary: true,
  is_verified: true,
  metadata: true,
  deleted_at: true,
};

export async function updateChannel(
  db: Queryable,
  tenantId: string,
  id: string,
  patch: ChannelPatch,
): Promise<ChannelRow> {
  return (await updateTenantRow<ChannelRow>(db, 'contact_channels', COLUMNS, tenantId, id, patch, PATCH))!;
}

/** Sets preference_order 1..n in the order of `ids` (channels of one contact and type). */
export async function setPreferenceOrder(db: Queryable, tenantId: string, ids: string[]): Promise<void> {
  await db.query(
    `UPDATE contact_channels c SET preference_order = o.pos, updated_at = now()
       FROM unnest($2::uuid[]) WITH ORDINALITY AS o(id, pos)
      WHERE c.tenant_id = $1 AND c.id = o.id AND c.preference_order <> o.pos`,
    [tenantId, ids],
  );
}

/** Soft-deletes every live channel of the contact; returns them. */
export async function deleteChannelsOf(db: Queryable, tenantId: string, contactId: string): Promise<ChannelRow[]> {
  const { rows } = await db.query<ChannelRow>(
    `UPDATE contact_channels SET deleted_at = now(), updated_at = now()
      WHERE tenant_id = $1 AND contact_id = $2 AND deleted_at IS NULL RETURNING ${COLUMNS}`,
    [tenantId, contactId],
  );
  return rows;
}
