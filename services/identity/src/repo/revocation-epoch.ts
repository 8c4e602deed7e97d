import { preparedStatement, type Queryable } from '@workauto/db';

/** The revocation epoch (migration 0008): bumped by triggers in the transaction of every change that may take a grant away. */
export async function readRevocationEpoch(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ epoch: string }>(READ_EPOCH([]));
  return Number(rows[0]?.epoch ?? 0);
}

/** Read by every gateway replica a few times a second while it serves writes. */
const READ_EPOCH = preparedStatement<[]>('revocation_epoch_read', 'SELECT epoch FROM revocation_epoch');
