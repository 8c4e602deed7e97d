import {
  listPage,
  newestFirst,
  updateTenantRow,
  type Columns,
  type KeysetPage,
  type PageQuery,
  type Queryable,
} from '@workauto/db';
import type { AuthType } from '../domain/auth.js';
import type { ListedTool } from '../domain/tools.js';

type AppStatusName = 'pending' | 'healthy' | 'auth_failed' | 'unreachable' | 'protocol_error' | 'needs_authorization';

export interface AppRow {
  id: string;
  tenant_id: string;
  slug: string;
  display_name: string;
  description: string | null;
  mcp_server_url: string;
  auth_type: AuthType;
  auth_header_name: string | null;
  auth_ciphertext: string | null;
  /** oauth2: the client_id the tenant gave (its secret is auth_ciphertext); null: Dynamic Client Registration. */
  oauth_client_id: string | null;
  /** oauth2: the scopes to request; null: the server's. */
  oauth_scope: string | null;
  auth_hint: string | null;
  key_version: number;
  status: AppStatusName;
  status_reason: string | null;
  consecutive_probe_failures: number;
  last_probed_at: Date | null;
  last_healthy_at: Date | null;
  enabled_tools: string[];
  metadata: Record<string, unknown>;
  target_version: number;
  created_at: Date;
  updated_at: Date;
}

export interface ToolRow {
  app_id: string;
  name: string;
  description: string | null;
  input_schema: Record<string, unknown>;
  first_seen_at: Date;
  last_seen_at: Date;
  stale: boolean;
}

const COLUMNS = `a.id, a.tenant_id, a.slug, a.display_name, a.description, a.mcp_server_url, a.auth_type, a.auth_header_name,
  a.auth_ciphertext, a.oauth_client_id, a.oauth_scope, a.auth_hint, a.key_version, a.status, a.status_reason, a.consecutive_probe_failures, a.last_probed_at,
  a.last_healthy_at, a.enabled_tools, a.metadata, a.target_version, a.created_at, a.updated_at`;
const RETURNING = COLUMNS.replace(/a\./g, '');

/** A new app's columns: its own fields, the sealed credential and the key id that wrapped it. */
export type NewApp = Pick<
  AppRow,
  | 'id'
  | 'tenant_id'
  | 'slug'
  | 'display_name'
  | 'description'
  | 'mcp_server_url'
  | 'auth_type'
  | 'auth_header_name'
  | 'auth_ciphertext'
  | 'auth_hint'
  | 'oauth_client_id'
  | 'oauth_scope'
  | 'key_version'
  | 'metadata'
  | 'status'
  | 'status_reason'
> & { auth_key_id: string | null };

/** Inserts an app, due for its first probe now. Undefined when the tenant already has the slug. */
export async function insertApp(db: Queryable, app: NewApp): Promise<AppRow | undefined> {
  const { rows } = await db.query<AppRow>(
    `INSERT INTO apps (id, tenant_id, slug, display_name, description, mcp_server_url, auth_type, auth_header_name,
                       auth_ciphertext, auth_key_id, auth_hint, key_version, metadata, oauth_client_id, oauth_scope,
                       status, status_reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
     ON CONFLICT (tenant_id, slug) DO NOTHING
     RETURNING ${RETURNING}`,
    [
      app.id,
      app.tenant_id,
      app.slug,
      app.display_name,
      app.description,
      app.mcp_server_url,
      app.auth_type,
      app.auth_header_name,
      app.auth_ciphertext,
      app.auth_key_id,
      app.auth_hint,
      app.key_version,
      app.metadata,
      app.oauth_client_id,
      app.oauth_scope,
      app.status,
      app.status_reason,
    ],
  );
  return rows[0];
}

export async function findApp(
  db: Queryable,
  tenantId: string,
  slug: string,
  lock?: 'update',
): Promise<AppRow | undefined> {
  const { rows } = await db.query<AppRow>(
    `SELECT ${COLUMNS} FROM apps a WHERE a.tenant_id = $1 AND a.slug = $2 ${lock === 'update' ? 'FOR UPDATE' : ''}`,
    [tenantId, slug],
  );
  return rows[0];
}

/** The app by id; locked with 'update' (a probe's result is written under this lock). */
export async function findAppById(
  db: Queryable,
  tenantId: string,
  id: string,
  lock?: 'update',
): Promise<AppRow | undefined> {
  const { rows } = await db.query<AppRow>(
    `SELECT ${COLUMNS} FROM apps a WHERE a.tenant_id = $1 AND a.id = $2 ${lock === 'update' ? 'FOR UPDATE' : ''}`,
    [tenantId, id],
  );
  return rows[0];
}

export async function listApps(db: Queryable, tenantId: string, page: PageQuery): Promise<KeysetPage<AppRow>> {
  return listPage<AppRow>(
    db,
    { columns: COLUMNS, from: 'apps a', where: 'a.tenant_id = $1', params: [tenantId], order: newestFirst('a') },
    page,
  );
}

export interface AppPatch {
  display_name?: string | undefined;
  description?: string | null | undefined;
  mcp_server_url?: string | undefined;
  enabled_tools?: string[] | undefined;
  metadata?: Record<string, unknown> | undefined;
  auth_type?: AppRow['auth_type'] | undefined;
  auth_header_name?: string | null | undefined;
  auth_ciphertext?: string | null | undefined;
  auth_key_id?: string | null | undefined;
  auth_hint?: string | null | undefined;
  oauth_client_id?: string | null | undefined;
  oauth_scope?: string | null | undefined;
  key_version?: number | undefined;
  status?: AppStatusName | undefined;
  status_reason?: string | null | undefined;
  consecutive_probe_failures?: number | undefined;
  last_probed_at?: Date | undefined;
  last_healthy_at?: Date | undefined;
  target_version?: number | undefined;
  next_probe_at?: Date | undefined;
}
const PATCH: Columns<AppPatch> = {
  display_name: true,
  description: true,
  mcp_server_url: true,
  enabled_tools: true,
  metadata: true,
  auth_type: true,
  auth_header_name: true,
  auth_ciphertext: true,
  auth_key_id: true,
  auth_hint: true,
  oauth_client_id: true,
  oauth_scope: true,
  key_version: true,
  status: true,
  status_reason: true,
  consecutive_probe_failures: true,
  last_probed_at: true,
  last_healthy_at: true,
  target_version: true,
  next_probe_at: true,
};

export async function updateApp(db: Queryable, tenantId: string, id: string, patch: AppPatch): Promise<AppRow> {
  const row = await updateTenantRow<AppRow>(db, 'apps', RETURNING, tenantId, id, patch, PATCH);
  if (!row) throw new Error(`app ${id} vanished under its lock`);
  return row;
}

export async function deleteApp(db: Queryable, tenantId: string, id: string): Promise<void> {
  await db.query('DELETE FROM apps WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
}

// ---------- tools ----------

/** The discovered tools of some apps of one tenant, by name. */
export async function toolsOf(db: Queryable, tenantId: string, appIds: string[]): Promise<Map<string, ToolRow[]>> {
  const out = new Map<string, ToolRow[]>(appIds.map((id) => [id, []]));
  if (appIds.length === 0) return out;
  const { rows } = await db.query<ToolRow>(
    `SELECT app_id, name, description, input_schema, first_seen_at, last_seen_at, stale FROM app_tools
      WHERE tenant_id = $1 AND app_id = ANY($2::uuid[]) ORDER BY app_id, name`,
    [tenantId, appIds],
  );
  for (const r of rows) out.get(r.app_id)?.push(r);
  return out;
}

export async function findTool(
  db: Queryable,
  tenantId: string,
  appId: string,
  name: string,
): Promise<ToolRow | undefined> {
  const { rows } = await db.query<ToolRow>(
    'SELECT app_id, name, description, input_schema, first_seen_at, last_seen_at, stale FROM app_tools WHERE tenant_id = $1 AND app_id = $2 AND name = $3',
    [tenantId, appId, name],
  );
  return rows[0];
}

/**
 * Applies a successful listing: listed tools are added or refreshed (stale false); when the
 * listing is complete, every other tool of the app is marked stale (never removed).
 */
export async function applyListing(
  db: Queryable,
  tenantId: string,
  appId: string,
  tools: ListedTool[],
  complete: boolean,
): Promise<void> {
  if (tools.length) {
    await db.query(
      `INSERT INTO app_tools (app_id, tenant_id, name, description, input_schema, first_seen_at, last_seen_at, stale)
       SELECT $1, $2, t.name, t.description, t.input_schema, now(), now(), false
         FROM jsonb_to_recordset($3::jsonb) AS t(name text, description text, input_schema jsonb)
       ON CONFLICT (app_id, name) DO UPDATE
         SET description = excluded.description, input_schema = excluded.input_schema, last_seen_at = now(), stale = false`,
      [appId, tenantId, JSON.stringify(tools)],
    );
  }
  if (complete) {
    await db.query(
      'UPDATE app_tools SET stale = true WHERE tenant_id = $1 AND app_id = $2 AND stale = false AND NOT (name = ANY($3::text[]))',
      [tenantId, appId, tools.map((t) => t.name)],
    );
  }
}

/**
 * Keeps an app's stored tools within limits: listed (non-stale) tools first, then stale ones from
 * the most recently seen; stale tools past `maxTools` or `maxBytes` in that order are deleted.
 */
export async function pruneTools(
  db: Queryable,
  tenantId: string,
  appId: string,
  maxTools: number,
  maxBytes: number,
): Promise<void> {
  await db.query(
    `DELETE FROM app_tools t
      USING (SELECT name,
                    row_number() OVER w AS n,
                    sum(octet_length(name) + coalesce(octet_length(description), 0) + octet_length(input_schema::text)) OVER w AS bytes
               FROM app_tools WHERE tenant_id = $1 AND app_id = $2
             WINDOW w AS (ORDER BY stale, last_seen_at DESC, name)) r
      WHERE t.tenant_id = $1 AND t.app_id = $2 AND t.name = r.name AND t.stale AND (r.n > $3 OR r.bytes > $4)`,
    [tenantId, appId, maxTools, maxBytes],
  );
}

/** The tenant's enabled, non-stale tools of healthy apps (for agents), by app slug and name. */
export async function agentTools(db: Queryable, tenantId: string): Promise<(ToolRow & { slug: string })[]> {
  const { rows } = await db.query<ToolRow & { slug: string }>(
    `SELECT a.slug, t.app_id, t.name, t.description, t.input_schema, t.first_seen_at, t.last_seen_at, t.stale
       FROM apps a JOIN app_tools t ON t.app_id = a.id AND t.tenant_id = a.tenant_id
      WHERE a.tenant_id = $1 AND a.status = 'healthy' AND NOT t.stale AND t.name = ANY(a.enabled_tools)
      ORDER BY a.slug, t.name`,
    [tenantId],
  );
  return rows;
}

// ---------- scheduled probes ----------

export interface DueProbe {
  id: string;
  tenant_id: string;
}

/**
 * Takes up to `limit` apps whose probe is due at `now` (FOR UPDATE SKIP LOCKED: two replicas never
 * take the same app; the rows stay locked until the caller's transaction ends, which enqueues
 * their probes). In the same statement each app's next probe moves to its next slot: app slots
 * are spread over the interval by a phase taken from the app's id, so 1,000 apps with a 5 min
 * interval are probed a few per second rather than all at once, and every app at most once per
 * interval whatever the number of replicas.
 */
export async function takeDueProbes(tx: Queryable, now: Date, limit: number, intervalMs: number): Promise<DueProbe[]> {
  const { rows } = await tx.query<DueProbe>(
    `WITH due AS (
       SELECT id FROM apps WHERE next_probe_at <= $3 ORDER BY next_probe_at LIMIT $1 FOR UPDATE SKIP LOCKED
     ), slot AS (
       SELECT id, (hashtextextended(id::text, 0) & 9007199254740991) % $2::bigint AS phase_ms,
              floor(extract(epoch FROM $3::timestamptz) * 1000)::bigint AS now_ms
         FROM due
     )
     UPDATE apps a
        SET next_probe_at = to_timestamp(((((s.now_ms - s.phase_ms) / $2::bigint) + 1) * $2::bigint + s.phase_ms) / 1000.0)
       FROM slot s
      WHERE a.id = s.id
      RETURNING a.id, a.tenant_id`,
    [limit, intervalMs, now],
  );
  return rows;
}
