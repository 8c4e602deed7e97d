/**
 * OAuth apps' stored state (docs/apps.md "OAuth"): one `app_oauth` row per oauth2 app (discovery,
 * the dynamically registered client, the tokens as ciphertexts) and the consent flows in progress
 * (`app_oauth_states`, single-use, keyed by the state's hash).
 */
import type { Queryable } from '@workauto/db';
import type { OAuthDiscoveryState } from '@modelcontextprotocol/sdk/client/auth.js';

export interface OAuthRow {
  app_id: string;
  tenant_id: string;
  authorization_server: string | null;
  resource: string | null;
  discovery: OAuthDiscoveryState | null;
  client_id: string | null;
  client_ciphertext: string | null;
  tokens_ciphertext: string | null;
  access_token_expires_at: Date | null;
  token_version: number;
  connected_at: Date | null;
}

const COLUMNS = `app_id, tenant_id, authorization_server, resource, discovery, client_id, client_ciphertext,
  tokens_ciphertext, access_token_expires_at, token_version, connected_at`;

/** The OAuth state of some apps of one tenant, by app id (apps without a row are absent). */
export async function oauthOf(db: Queryable, tenantId: string, appIds: string[]): Promise<Map<string, OAuthRow>> {
  if (appIds.length === 0) return new Map();
  const { rows } = await db.query<OAuthRow>(
    `SELECT ${COLUMNS} FROM app_oauth WHERE tenant_id = $1 AND app_id = ANY($2::uuid[])`,
    [tenantId, appIds],
  );
  return new Map(rows.map((r) => [r.app_id, r]));
}

export async function findOAuth(db: Queryable, tenantId: string, appId: string): Promise<OAuthRow | undefined> {
  return (await oauthOf(db, tenantId, [appId])).get(appId);
}

/** What an authorize found and registered: kept for the callback, refreshes and revocation. */
export interface Discovered {
  authorization_server: string;
  resource: string | null;
  discovery: OAuthDiscoveryState;
  /** A client Dynamic Client Registration just gave (undefined: keep the stored one). */
  registered?: { client_id: string; client_ciphertext: string; client_key_id: string } | undefined;
}

export async function saveDiscovered(db: Queryable, tenantId: string, appId: string, d: Discovered): Promise<void> {
  const r = d.registered;
  await db.query(
    `INSERT INTO app_oauth (app_id, tenant_id, authorization_server, resource, discovery, client_id, client_ciphertext, client_key_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (app_id) DO UPDATE SET authorization_server = excluded.authorization_server, resource = excluded.resource,
       discovery = excluded.discovery,
       client_id = CASE WHEN $9 THEN excluded.client_id ELSE app_oauth.client_id END,
       client_ciphertext = CASE WHEN $9 THEN excluded.client_ciphertext ELSE app_oauth.client_ciphertext END,
       client_key_id = CASE WHEN $9 THEN excluded.client_key_id ELSE app_oauth.client_key_id END,
       updated_at = now()`,
    [
      appId,
      tenantId,
      d.authorization_server,
      d.resource,
      JSON.stringify(d.discovery),
      r?.client_id ?? null,
      r?.client_ciphertext ?? null,
      r?.client_key_id ?? null,
      r !== undefined,
    ],
  );
}

/**
 * Stores tokens over the version they were derived from (connect: any version); undefined when the
 * version moved meanwhile (the tokens were forgotten or replaced: these are not kept).
 */
export async function saveTokens(
  db: Queryable,
  tenantId: string,
  appId: string,
  tokens: { ciphertext: string; keyId: string; expiresAt: Date | null },
  opts: { overVersion?: number; connectedAt?: Date },
): Promise<OAuthRow | undefined> {
  const { rows } = await db.query<OAuthRow>(
    `UPDATE app_oauth SET tokens_ciphertext = $3, tokens_key_id = $4, access_token_expires_at = $5,
            token_version = token_version + 1, connected_at = coalesce($7, connected_at), updated_at = now()
      WHERE tenant_id = $1 AND app_id = $2 AND ($6::integer IS NULL OR token_version = $6)
      RETURNING ${COLUMNS}`,
    [
      tenantId,
      appId,
      tokens.ciphertext,
      tokens.keyId,
      tokens.expiresAt,
      opts.overVersion ?? null,
      opts.connectedAt ?? null,
    ],
  );
  return rows[0];
}

/** Forgets the tokens (a refused refresh, a disconnect); the version moves, so no refresh in flight keeps its result. */
export async function forgetTokens(db: Queryable, tenantId: string, appId: string): Promise<void> {
  await db.query(
    `UPDATE app_oauth SET tokens_ciphertext = NULL, tokens_key_id = NULL, access_token_expires_at = NULL,
            token_version = token_version + 1, connected_at = NULL, updated_at = now()
      WHERE tenant_id = $1 AND app_id = $2`,
    [tenantId, appId],
  );
}

/** Forgets the whole connection (a new server URL or client): discovery, registered client, tokens. */
export async function forgetConnection(db: Queryable, tenantId: string, appId: string): Promise<void> {
  await db.query(
    `UPDATE app_oauth SET authorization_server = NULL, resource = NULL, discovery = NULL, client_id = NULL,
            client_ciphertext = NULL, client_key_id = NULL, tokens_ciphertext = NULL, tokens_key_id = NULL,
            access_token_expires_at = NULL, token_version = token_version + 1, connected_at = NULL, updated_at = now()
      WHERE tenant_id = $1 AND app_id = $2`,
    [tenantId, appId],
  );
}

/**
 * Serialises the refreshes (and the disconnect) of one app's tokens across replicas until the
 * transaction ends: two replicas never spend one refresh token twice. An advisory lock rather than
 * the row's, so that writes of the app (PATCH, a probe's result) never wait on a token request.
 */
export async function lockTokens(tx: Queryable, appId: string, waitMs: number): Promise<void> {
  // Waiting for another replica's refresh counts against the statement timeout (3 s by default).
  await tx.query(`SET LOCAL statement_timeout = ${Math.ceil(waitMs)}`);
  await tx.query("SELECT pg_advisory_xact_lock(hashtextextended('app_oauth_tokens:' || $1::text, 0))", [appId]);
}

// ---------- consent flows ----------

export interface StateRow {
  tenant_id: string;
  app_id: string;
  target_version: number;
  return_to: string;
  redirect_uri: string;
  code_verifier_ciphertext: string;
  actor_type: string;
  actor_id: string;
  member_id: string | null;
}

export async function insertState(
  db: Queryable,
  s: StateRow & { state_hash: string; expires_at: Date; now: Date },
): Promise<void> {
  // Flows of this app that expired are of no use any more.
  await db.query('DELETE FROM app_oauth_states WHERE tenant_id = $1 AND app_id = $2 AND expires_at <= $3', [
    s.tenant_id,
    s.app_id,
    s.now,
  ]);
  await db.query(
    `INSERT INTO app_oauth_states (state_hash, tenant_id, app_id, target_version, return_to, redirect_uri,
                                   code_verifier_ciphertext, actor_type, actor_id, member_id, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    [
      s.state_hash,
      s.tenant_id,
      s.app_id,
      s.target_version,
      s.return_to,
      s.redirect_uri,
      s.code_verifier_ciphertext,
      s.actor_type,
      s.actor_id,
      s.member_id,
      s.expires_at,
    ],
  );
}

/** Consumes a live state exactly once: a replayed, expired or unknown state returns nothing. */
export async function consumeState(db: Queryable, stateHash: string, now: Date): Promise<StateRow | undefined> {
  const { rows } = await db.query<StateRow>(
    `UPDATE app_oauth_states SET consumed_at = $2
      WHERE state_hash = $1 AND consumed_at IS NULL AND expires_at > $2
      RETURNING tenant_id, app_id, target_version, return_to, redirect_uri, code_verifier_ciphertext, actor_type, actor_id, member_id`,
    [stateHash, now],
  );
  return rows[0];
}

/** Makes a consumed state usable again: its callback failed before the authorization server judged the code. */
export async function releaseState(db: Queryable, stateHash: string): Promise<void> {
  await db.query('UPDATE app_oauth_states SET consumed_at = NULL WHERE state_hash = $1', [stateHash]);
}
