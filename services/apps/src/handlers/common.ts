import type { Keyring } from '@workauto/crypto';
import type { Pool, Queryable } from '@workauto/db';
import { reducedUrl, type EgressPolicy } from '@workauto/egress';
import { enumMapping, type CallContext, type Handlers } from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { resourceJson } from '@workauto/protos';
import {
  App,
  AppStatus,
  AuthType,
  type AppsServiceService,
  type DiscoveredTool,
} from '@workauto/protos/workauto/apps/v1/apps.js';
import * as apps from '../repo/apps.js';
import type { AppRow, ToolRow } from '../repo/apps.js';
import { oauthOf, type OAuthRow } from '../repo/oauth.js';
import type { Prober } from '../probes.js';
import type { AppCredentials } from '../credentials.js';
import type { AppOAuth, OAuthRedirects } from '../oauth/connect.js';

export const SOURCE = 'apps';
export const authTypes = enumMapping(AuthType);
const statuses = enumMapping(AppStatus);

/**
 * Field limits the proto's rules cannot state: enabled_tools counts the distinct names (docs/apps.md).
 * The others (lengths, JSON sizes) are rules in proto/workauto/apps/v1/apps.proto.
 */
export const LIMITS = {
  enabledTools: 1_000,
};

export interface AppsDeps {
  pool: Pool;
  keyring: Keyring;
  egress: EgressPolicy;
  prober: Prober;
  /** Opens an app's credential for an exchange with its server (an OAuth app's token, refreshed). */
  credentials: AppCredentials;
  /** The OAuth flows of oauth2 apps: authorize, callback, disconnect. */
  oauth: AppOAuth;
  /** OAUTH_REDIRECT_BASE_URL and OAUTH_ALLOWED_RETURN_ORIGINS. */
  redirects: OAuthRedirects;
  logger: Logger;
  /** One tool call's timeout. */
  toolCallTimeoutMs: number;
  /** The most bytes of a tool call's answer read (APPS_TOOL_RESULT_MAX_BYTES). */
  toolResultMaxBytes: number;
}

type H = Handlers<typeof AppsServiceService>;
/** The handler of one rpc. */
export type Handler<K extends keyof H> = H[K];

function toTool(row: ToolRow): DiscoveredTool {
  return {
    name: row.name,
    input_schema: row.input_schema,
    first_seen_at: row.first_seen_at,
    last_seen_at: row.last_seen_at,
    description: row.description ?? undefined,
    stale: row.stale,
  };
}

/** Callers below admin on apps see mcp_server_url reduced: paths and queries often carry tokens. */
export const fullUrl = (ctx: CallContext) => ctx.allows('apps', 'admin');

/** What an App is made of beside its row: its discovered tools and, for an oauth2 app, its connection. */
export interface AppParts {
  tools: ToolRow[];
  oauth: OAuthRow | undefined;
}

/** The parts of some apps of one tenant, by app id. */
export async function partsOf(db: Queryable, tenantId: string, appIds: string[]): Promise<Map<string, AppParts>> {
  const [tools, oauth] = await Promise.all([apps.toolsOf(db, tenantId, appIds), oauthOf(db, tenantId, appIds)]);
  return new Map(appIds.map((id) => [id, { tools: tools.get(id)!, oauth: oauth.get(id) }]));
}

/** The parts of one app. */
export const partsOne = async (db: Queryable, row: AppRow): Promise<AppParts> =>
  (await partsOf(db, row.tenant_id, [row.id])).get(row.id)!;

/** An oauth2 app's connection as the API shows it: never a token. */
function toOAuth(row: AppRow, oauth: OAuthRow | undefined): AppOAuthView | undefined {
  if (row.auth_type !== 'oauth2') return undefined;
  return {
    client_id: row.oauth_client_id ?? oauth?.client_id ?? undefined,
    dynamic_client: row.oauth_client_id === null && !!oauth?.client_id,
    scope: row.oauth_scope ?? undefined,
    // An issuer URL has no query or fragment (RFC 8414 §2): nothing to reduce for members.
    authorization_server: oauth?.authorization_server ?? undefined,
    connected_at: oauth?.connected_at ?? undefined,
    access_token_expires_at: oauth?.tokens_ciphertext ? (oauth.access_token_expires_at ?? undefined) : undefined,
  };
}
type AppOAuthView = NonNullable<App['oauth']>;

/** The App as the API returns it; `fullUrl` false reduces mcp_server_url to scheme, host and port. */
export function toApp(row: AppRow, parts: AppParts, fullUrl: boolean): App {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    slug: row.slug,
    display_name: row.display_name,
    mcp_server_url: fullUrl ? row.mcp_server_url : reducedUrl(row.mcp_server_url),
    auth_type: authTypes.fromDomain(row.auth_type),
    status: statuses.fromDomain(row.status),
    consecutive_probe_failures: row.consecutive_probe_failures,
    discovered_tools: parts.tools.map(toTool),
    enabled_tools: row.enabled_tools,
    metadata: row.metadata,
    created_at: row.created_at,
    updated_at: row.updated_at,
    auth_header_name: row.auth_header_name ?? undefined,
    auth_hint: row.auth_hint ?? undefined,
    description: row.description ?? undefined,
    last_healthy_at: row.last_healthy_at ?? undefined,
    last_probed_at: row.last_probed_at ?? undefined,
    status_reason: row.status_reason ?? undefined,
    oauth: toOAuth(row, parts.oauth),
  };
}

/** Event data: the App as GET /apps/{slug} returns it (no secret: App has no field for it). */
export const appData = (row: AppRow, parts: AppParts) => resourceJson(App, toApp(row, parts, true));
