import type { Queryable } from '@workauto/db';

export interface OAuthStateRow {
  tenant_id: string;
  idp: string;
  connection_id: string;
  return_to: string;
  code_verifier_cipher: string;
  nonce: string | null;
  actor_type: string;
  actor_id: string;
}

export async function insertOAuthState(
  db: Queryable,
  s: OAuthStateRow & { state_hash: string; expires_at: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO oauth_states (state_hash, tenant_id, idp, connection_id, return_to, code_verifier_cipher, nonce, actor_type, actor_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      s.state_hash,
      s.tenant_id,
      s.idp,
      s.connection_id,
      s.return_to,
      s.code_verifier_cipher,
      s.nonce,
      s.actor_type,
      s.actor_id,
      s.expires_at,
    ],
  );
}

/** Consumes a live state exactly once: a replayed, expired or unknown state returns nothing. */
export async function consumeOAuthState(
  db: Queryable,
  stateHash: string,
  idp: string,
): Promise<OAuthStateRow | undefined> {
  const { rows } = await db.query<OAuthStateRow>(
    `UPDATE oauth_states SET consumed_at = now()
      WHERE state_hash = $1 AND idp = $2 AND consumed_at IS NULL AND expires_at > now()
      RETURNING tenant_id, idp, connection_id, return_to, code_verifier_cipher, nonce, actor_type, actor_id`,
    [stateHash, idp],
  );
  return rows[0];
}

/** Makes a consumed state usable again: its callback failed before the provider was reached. */
export async function releaseOAuthState(db: Queryable, stateHash: string): Promise<void> {
  await db.query('UPDATE oauth_states SET consumed_at = NULL WHERE state_hash = $1', [stateHash]);
}
