import { newId, type Queryable } from '@workauto/db';

/** Secrets that sign at once at most: the current one and the newest rotated-out ones in their grace. */
const MAX_LIVE_SECRETS = 10;

/** Ciphertexts of the secrets that sign now: the current one first, then those still in their grace. */
export async function signingSecrets(db: Queryable, tenantId: string, endpointId: string): Promise<string[]> {
  const { rows } = await db.query<{ secret: string }>(
    `SELECT secret FROM webhook_endpoint_secrets
      WHERE tenant_id = $1 AND endpoint_id = $2 AND (expires_at IS NULL OR expires_at > now())
      ORDER BY expires_at IS NULL DESC, created_at DESC`,
    [tenantId, endpointId],
  );
  return rows.map((r) => r.secret);
}

/**
 * Makes `ciphertext` the current secret: the previous current one keeps signing for graceMs,
 * secrets whose grace ended are deleted. The caller holds the endpoint's lock.
 */
export async function rotateSecret(
  db: Queryable,
  tenantId: string,
  endpointId: string,
  ciphertext: string,
  graceMs: number,
): Promise<Date | undefined> {
  await db.query(
    'DELETE FROM webhook_endpoint_secrets WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at <= now()',
    [tenantId, endpointId],
  );
  const { rows } = await db.query<{ expires_at: Date }>(
    `UPDATE webhook_endpoint_secrets SET expires_at = now() + $3 * interval '1 millisecond'
      WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at IS NULL RETURNING expires_at`,
    [tenantId, endpointId, graceMs],
  );
  await db.query('INSERT INTO webhook_endpoint_secrets (id, tenant_id, endpoint_id, secret) VALUES ($1, $2, $3, $4)', [
    newId(),
    tenantId,
    endpointId,
    ciphertext,
  ]);
  // Many rotations within a grace: only the newest MAX_LIVE_SECRETS keep signing (Svix keeps 10).
  await db.query(
    `UPDATE webhook_endpoint_secrets SET expires_at = now()
      WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at > now()
        AND id NOT IN (SELECT id FROM webhook_endpoint_secrets WHERE tenant_id = $1 AND endpoint_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3)`,
    [tenantId, endpointId, MAX_LIVE_SECRETS],
  );
  return rows[0]?.expires_at;
}
