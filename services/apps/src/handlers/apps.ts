import { Keyring, hint } from '@workauto/crypto';
import { newId, withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import {
  changedFields,
  checkEnum,
  checkMetadata,
  errors,
  parsePage,
  patchNulls,
  textOrNull,
  toPage,
  validate,
  type CallContext,
  type Handlers,
  type Validator,
} from '@workauto/grpc';
import { CallToolResponse, type AppsServiceService } from '@workauto/protos/workauto/apps/v1/apps.js';
import { checkAuth, SLUG, type AuthInput, type AuthType } from '../domain/auth.js';
import { callServerTool, resultTooLarge, type ToolResult } from '../mcp/operations.js';
import { McpExchangeError } from '../mcp/session.js';
import { sessionTarget } from '../probes.js';
import * as apps from '../repo/apps.js';
import type { AppRow } from '../repo/apps.js';
import { appData, authTypes, fullUrl, LIMITS, secretContext, SOURCE, toApp, type AppsDeps } from './common.js';

type H = Handlers<typeof AppsServiceService>;

/** The largest message gRPC clients (the gateway, agents) accept by default. */
const GRPC_MESSAGE_MAX_BYTES = 4 * 1024 * 1024;

const toResponse = (result: ToolResult): CallToolResponse => ({
  content: result.content,
  is_error: result.isError,
  structured_content: result.structuredContent,
});

const SLUG_RULE =
  'must match ^[a-z][a-z0-9-]{1,62}$ (lowercase letter first, then 1-62 lowercase letters, digits or -)';

/** The auth fields of a request: the enum mapped, then checked (domain/auth.ts). */
function authOf(
  v: Validator,
  auth: { type: number; secret?: string | undefined; header_name?: string | undefined } | undefined,
  allowNone: boolean,
): AuthInput {
  if (auth) checkEnum(v, 'auth.type', auth.type, authTypes, !allowNone);
  const type = auth ? (authTypes.toDomain(auth.type) as AuthType | undefined) : undefined;
  return checkAuth(v, 'auth', auth && { type, secret: auth.secret, header_name: auth.header_name }, { allowNone });
}

/** The stored form of a credential for one app: ciphertext, key id and hint (nothing for none). */
function sealed(keyring: Keyring, tenantId: string, appId: string, auth: AuthInput) {
  if (!auth.secret) return { auth_ciphertext: null, auth_key_id: null, auth_hint: null };
  const ciphertext = keyring.encrypt(auth.secret, secretContext(tenantId, appId));
  return { auth_ciphertext: ciphertext, auth_key_id: Keyring.keyIdOf(ciphertext), auth_hint: hint(auth.secret) };
}

export function appHandlers(deps: AppsDeps): H {
  const { pool, keyring, egress, prober } = deps;

  const withTools = async (db: Parameters<typeof apps.toolsOf>[0], row: AppRow, full: boolean) =>
    toApp(row, (await apps.toolsOf(db, row.tenant_id, [row.id])).get(row.id)!, full);
  const mustFind = async (db: Parameters<typeof apps.findApp>[0], tenantId: string, slug: string, lock?: 'update') => {
    const row = await apps.findApp(db, tenantId, slug, lock);
    if (!row) throw errors.notFound('app', slug);
    return row;
  };
  const checkSlug = (slug: string) => validate().check(SLUG.test(slug), 'slug', SLUG_RULE).done();

  return {
    async createApp(req, ctx) {
      const v = validate()
        .check(SLUG.test(req.slug), 'slug', SLUG_RULE)
        .text('display_name', req.display_name, { required: true, max: LIMITS.displayName })
        .text('description', req.description, { min: 0, max: LIMITS.description })
        .text('mcp_server_url', req.mcp_server_url, { required: true, max: 2048 });
      checkMetadata(v, 'metadata', req.metadata);
      const auth = authOf(v, req.auth, true);
      v.done();
      // Checked and stored as sent: whitespace anywhere (surrounding too) is refused, never trimmed away.
      egress.checkUrl(req.mcp_server_url, 'mcp_server_url');
      const url = req.mcp_server_url;
      const tenantId = ctx.tenant;
      const id = newId();
      const app = await withTransaction(
        pool,
        async (tx) => {
          const row = await apps.insertApp(tx, {
            id,
            tenant_id: tenantId,
            slug: req.slug,
            display_name: req.display_name.trim(),
            description: textOrNull(req.description) ?? null,
            mcp_server_url: url,
            auth_type: auth.type,
            auth_header_name: auth.headerName,
            ...sealed(keyring, tenantId, id, auth),
            key_version: auth.secret ? 1 : 0,
            metadata: req.metadata ?? {},
          });
          if (!row)
            throw errors.alreadyExists(
              'APP_SLUG_TAKEN',
              `an app with slug ${req.slug} already exists; choose another slug or PATCH /api/v1/apps/${req.slug}`,
              { slug: req.slug },
            );
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.created',
            resourceType: 'app',
            resourceId: row.id,
            data: appData(row, []),
            metadata: {
              slug: row.slug,
              display_name: row.display_name,
              mcp_server_url: row.mcp_server_url,
              auth_type: row.auth_type,
            },
          });
          return toApp(row, [], fullUrl(ctx));
        },
        { signal: ctx.signal },
      );
      prober.wake(); // its first probe is due now
      return app;
    },

    async listApps(req, ctx) {
      const page = parsePage(req);
      const result = await apps.listApps(pool, ctx.tenant, page);
      const tools = await apps.toolsOf(
        pool,
        ctx.tenant,
        result.rows.map((r) => r.id),
      );
      const full = fullUrl(ctx);
      return toPage(result, (row) => toApp(row, tools.get(row.id)!, full));
    },

    async getApp(req, ctx) {
      checkSlug(req.slug);
      return withTools(pool, await mustFind(pool, ctx.tenant, req.slug), fullUrl(ctx));
    },

    async updateApp(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
      v.check(SLUG.test(req.slug), 'slug', SLUG_RULE)
        .text('display_name', req.display_name, { max: LIMITS.displayName })
        .text('description', req.description, { min: 0, max: LIMITS.description })
        .text('mcp_server_url', req.mcp_server_url, { max: 2048 });
      checkMetadata(v, 'metadata', req.metadata);
      const setsTools = req.update_mask?.includes('enabled_tools') || req.enabled_tools.length > 0;
      const enabled = [...new Set(req.enabled_tools)];
      if (setsTools && enabled.length > LIMITS.enabledTools)
        v.add('enabled_tools', `at most ${LIMITS.enabledTools} tools`);
      v.done();
      const url = req.mcp_server_url;
      if (url !== undefined) egress.checkUrl(url, 'mcp_server_url');
      const tenantId = ctx.tenant;
      const { app, retarget } = await withTransaction(
        pool,
        async (tx) => {
          const current = await mustFind(tx, tenantId, req.slug, 'update');
          if (setsTools) {
            const discovered = new Set(
              (await apps.toolsOf(tx, tenantId, [current.id])).get(current.id)!.map((t) => t.name),
            );
            const unknown = validate();
            req.enabled_tools.forEach((name, i) =>
              unknown.check(
                discovered.has(name),
                `enabled_tools[${i}]`,
                `${JSON.stringify(name.slice(0, 128))} is not a discovered tool of this app; GET /api/v1/apps/${current.slug} lists them (probe it first if the list is empty)`,
              ),
            );
            unknown.done();
          }
          const retarget = url !== undefined && url !== current.mcp_server_url;
          const patch = {
            display_name: req.display_name?.trim(),
            description: textOrNull(req.description),
            mcp_server_url: retarget ? url : undefined,
            enabled_tools: setsTools ? enabled : undefined,
            metadata: req.metadata,
          };
          if (Object.values(patch).every((x) => x === undefined))
            return { app: await withTools(tx, current, fullUrl(ctx)), retarget: false };
          // A new server: what was known of the old one no longer holds; it is probed again at once.
          const target = retarget
            ? {
                status: 'pending' as const,
                status_reason: null,
                consecutive_probe_failures: 0,
                target_version: current.target_version + 1,
                next_probe_at: new Date(0),
              }
            : {};
          const row = await apps.updateApp(tx, tenantId, current.id, { ...patch, ...target });
          const tools = (await apps.toolsOf(tx, tenantId, [row.id])).get(row.id)!;
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.updated',
            resourceType: 'app',
            resourceId: row.id,
            data: appData(row, tools),
            metadata: changedFields(patch),
          });
          return { app: toApp(row, tools, fullUrl(ctx)), retarget };
        },
        { signal: ctx.signal },
      );
      if (retarget) prober.wake();
      return app;
    },

    async deleteApp(req, ctx) {
      checkSlug(req.slug);
      await withTransaction(
        pool,
        async (tx) => {
          const current = await mustFind(tx, ctx.tenant, req.slug, 'update');
          await apps.deleteApp(tx, ctx.tenant, current.id);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.deleted',
            resourceType: 'app',
            resourceId: current.id,
            metadata: { slug: current.slug },
          });
        },
        { signal: ctx.signal },
      );
      return {};
    },

    async rotateAppAuth(req, ctx) {
      const v = validate().check(SLUG.test(req.slug), 'slug', SLUG_RULE);
      if (!req.auth) v.add('auth', 'is required: {type: bearer | header, secret, header_name?}');
      const auth = authOf(v, req.auth, false);
      v.done();
      const tenantId = ctx.tenant;
      // No probe (spec rule 7): POST /apps/{slug}/probe verifies the new secret.
      return withTransaction(
        pool,
        async (tx) => {
          const current = await mustFind(tx, tenantId, req.slug, 'update');
          const { auth_ciphertext, auth_key_id, auth_hint } = sealed(keyring, tenantId, current.id, auth);
          const row = await apps.updateApp(tx, tenantId, current.id, {
            auth_type: auth.type,
            auth_header_name: auth.headerName,
            auth_ciphertext: auth_ciphertext!,
            auth_key_id: auth_key_id!,
            auth_hint: auth_hint!,
            key_version: current.key_version + 1,
            target_version: current.target_version + 1,
          });
          const tools = (await apps.toolsOf(tx, tenantId, [row.id])).get(row.id)!;
          await recordEvent(tx, SOURCE, ctx, {
            type: 'app.auth_rotated',
            resourceType: 'app',
            resourceId: row.id,
            data: appData(row, tools),
            metadata: {
              auth_type: row.auth_type,
              auth_header_name: row.auth_header_name,
              auth_hint: row.auth_hint,
              key_version: row.key_version,
            },
          });
          return toApp(row, tools, fullUrl(ctx));
        },
        { signal: ctx.signal },
      );
    },

    async probeApp(req, ctx) {
      checkSlug(req.slug);
      const current = await mustFind(pool, ctx.tenant, req.slug);
      const after = await prober.probe(ctx.tenant, current.id, ctx, { signal: ctx.signal });
      if (!after) throw errors.notFound('app', req.slug);
      return toApp(after.row, after.tools, fullUrl(ctx));
    },

    async callTool(req, ctx) {
      const v = validate()
        .check(SLUG.test(req.slug), 'slug', SLUG_RULE)
        .text('name', req.name, { required: true, max: 128 });
      const args = req.arguments ?? {};
      v.check(
        Buffer.byteLength(JSON.stringify(args)) <= LIMITS.arguments,
        'arguments',
        `must be at most ${LIMITS.arguments} bytes of JSON`,
      ).done();
      const app = await mustFind(pool, ctx.tenant, req.slug);
      const tool = await apps.findTool(pool, ctx.tenant, app.id, req.name);
      if (!tool || !app.enabled_tools.includes(req.name)) {
        throw errors.failedPrecondition(
          'APP_TOOL_NOT_ENABLED',
          `tool ${req.name} is not enabled on app ${app.slug}; enable a discovered tool with PATCH /api/v1/apps/${app.slug} {"enabled_tools": [...]}`,
        );
      }
      if (tool.stale) {
        throw errors.failedPrecondition(
          'APP_TOOL_STALE',
          `tool ${req.name} was missing from the last listing of app ${app.slug}; it can be called again once the server lists it (POST /api/v1/apps/${app.slug}/probe)`,
        );
      }
      const started = performance.now();
      let response: CallToolResponse;
      try {
        const result = await callServerTool(
          {
            ...sessionTarget(keyring, app),
            egress,
            timeoutMs: deps.toolCallTimeoutMs,
            signal: ctx.signal,
            maxResponseBytes: deps.toolResultMaxBytes,
          },
          req.name,
          args,
        );
        response = toResponse(result);
        // JSON numbers and small values grow as protobuf Values: a result under the limit can still
        // pass the 4 MiB gRPC message the callers accept, which they would report as "overloaded".
        const size = CallToolResponse.encode(response).finish().length;
        if (size > GRPC_MESSAGE_MAX_BYTES)
          response = toResponse(
            resultTooLarge(`is too large to return (${size} bytes as a message, at most ${GRPC_MESSAGE_MAX_BYTES})`),
          );
      } catch (err) {
        const category = ctx.signal.aborted
          ? 'cancelled'
          : err instanceof McpExchangeError
            ? err.failure.status
            : 'internal';
        await auditToolCall(deps, ctx, app, req.name, started, { outcome: 'failed', failure_category: category });
        if (!(err instanceof McpExchangeError)) throw err;
        const { status, reason } = err.failure;
        throw errors.unavailable(
          `APP_${status.toUpperCase()}`,
          `app ${app.slug} could not run tool ${req.name}: ${reason}`,
          { app_slug: app.slug, status },
        );
      }
      await auditToolCall(deps, ctx, app, req.name, started, { outcome: response.is_error ? 'is_error' : 'ok' });
      return response;
    },

    async listAgentTools(_req, ctx) {
      const rows = await apps.agentTools(pool, ctx.tenant);
      return {
        tools: rows.map((r) => ({
          app_slug: r.slug,
          name: r.name,
          description: r.description ?? '',
          input_schema: r.input_schema,
        })),
      };
    },
  };
}

/** How a tool call ended, as its audit entry says it: never the arguments or the result. */
type ToolCallOutcome =
  | { outcome: 'ok' | 'is_error' }
  | {
      outcome: 'failed';
      failure_category: 'auth_failed' | 'unreachable' | 'protocol_error' | 'cancelled' | 'internal';
    };

/**
 * The audit entry of a tool call (`app.tool_called`, actor the caller: a member's key, or a run as
 * `agent`), in its own transaction after the call, which itself writes nothing. It does not take the
 * caller's signal: a caller that gave up still gets its call audited. If it cannot be written the
 * call's answer still goes back (the tool ran; failing the answer would invite a second call) and
 * the service logs an error.
 */
async function auditToolCall(
  deps: AppsDeps,
  ctx: CallContext,
  app: AppRow,
  tool: string,
  startedAt: number,
  outcome: ToolCallOutcome,
): Promise<void> {
  const metadata = {
    app_slug: app.slug,
    tool,
    ...outcome,
    duration_ms: Math.round(performance.now() - startedAt),
    ...(ctx.actor?.memberId ? { member_id: ctx.actor.memberId } : {}),
  };
  try {
    await withTransaction(deps.pool, (tx) =>
      recordEvent(tx, SOURCE, ctx, { type: 'app.tool_called', resourceType: 'app', resourceId: app.id, metadata }),
    );
  } catch (err) {
    deps.logger.error(
      { err, app_slug: app.slug, tool },
      'could not record the audit entry of an app tool call (the call was made); is the database reachable?',
    );
  }
}
