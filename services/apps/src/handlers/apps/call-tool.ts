import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import * as grpc from '@grpc/grpc-js';
import { DomainError, errors, type CallContext } from '@workauto/grpc';
import { CallToolResponse } from '@workauto/protos/workauto/apps/v1/apps.js';
import { callServerTool, resultTooLarge, type ToolResult } from '../../mcp/operations.js';
import { McpExchangeError } from '../../mcp/session.js';
import { AppNeedsAuthorization } from '../../domain/oauth.js';
import * as apps from '../../repo/apps.js';
import type { AppRow } from '../../repo/apps.js';
import { SOURCE, type AppsDeps, type Handler } from '../common.js';
import { mustFind } from './common.js';

/** The largest message gRPC clients (the gateway, agents) accept by default. */
const GRPC_MESSAGE_MAX_BYTES = 4 * 1024 * 1024;

const toResponse = (result: ToolResult): CallToolResponse => ({
  content: result.content,
  is_error: result.isError,
  structured_content: result.structuredContent,
});

export function callTool(deps: AppsDeps): Handler<'callTool'> {
  const { pool, credentials, egress } = deps;
  return async (req, ctx) => {
    const args = req.arguments ?? {};
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
    let sent = false as boolean; // set in the callback below, which TypeScript does not follow
    let response: CallToolResponse;
    try {
      const result = await credentials.use(app, ctx, (target) => {
        sent = true;
        return callServerTool(
          {
            ...target,
            egress,
            timeoutMs: deps.toolCallTimeoutMs,
            signal: ctx.signal,
            maxResponseBytes: deps.toolResultMaxBytes,
          },
          req.name,
          args,
        );
      });
      response = toResponse(result);
      // JSON numbers and small values grow as protobuf Values: a result under the limit can still
      // pass the 4 MiB gRPC message the callers accept, which they would report as "overloaded".
      const size = CallToolResponse.encode(response).finish().length;
      if (size > GRPC_MESSAGE_MAX_BYTES)
        response = toResponse(
          resultTooLarge(`is too large to return (${size} bytes as a message, at most ${GRPC_MESSAGE_MAX_BYTES})`),
        );
    } catch (err) {
      // An app without a usable token: nothing was sent (no call to audit), or its server refused
      // the token and the refresh was refused too.
      if (err instanceof AppNeedsAuthorization) {
        if (sent)
          await auditToolCall(deps, ctx, app, req.name, started, {
            outcome: 'failed',
            failure_category: 'needs_authorization',
          });
        throw new DomainError(
          grpc.status.FAILED_PRECONDITION,
          'APP_NEEDS_AUTHORIZATION',
          `app ${app.slug} needs authorization to run tool ${req.name}: ${err.reason}`,
          { metadata: { app_slug: app.slug, status: 'needs_authorization' } },
        );
      }
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
  };
}

/** How a tool call ended, as its audit entry says it: never the arguments or the result. */
type ToolCallOutcome =
  | { outcome: 'ok' | 'is_error' }
  | {
      outcome: 'failed';
      failure_category:
        'auth_failed' | 'unreachable' | 'protocol_error' | 'needs_authorization' | 'cancelled' | 'internal';
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
