import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { changedFields, patchNulls, textOrNull, validate } from '@workauto/grpc';
import * as apps from '../../repo/apps.js';
import { connectHint } from '../../domain/oauth.js';
import { forgetConnection } from '../../repo/oauth.js';
import { appData, fullUrl, LIMITS, partsOne, SOURCE, toApp, type AppsDeps, type Handler } from '../common.js';
import { mustFind, viewOf } from './common.js';

export function updateApp(deps: AppsDeps): Handler<'updateApp'> {
  const { pool, egress, prober } = deps;
  return async (patchRequest, ctx) => {
    const v = validate();
    const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
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
          return { app: await viewOf(tx, current, fullUrl(ctx)), retarget: false };
        // A new server: what was known of the old one no longer holds; it is probed again at once.
        // An oauth2 app's tokens, client and discovery were the old server's: it is connected again.
        const oauth2 = current.auth_type === 'oauth2';
        if (retarget && oauth2) await forgetConnection(tx, tenantId, current.id);
        const target = retarget
          ? {
              status: oauth2 ? ('needs_authorization' as const) : ('pending' as const),
              status_reason: oauth2 ? `the server URL changed; ${connectHint(current.slug)}` : null,
              consecutive_probe_failures: 0,
              target_version: current.target_version + 1,
              next_probe_at: new Date(0),
            }
          : {};
        const row = await apps.updateApp(tx, tenantId, current.id, { ...patch, ...target });
        const parts = await partsOne(tx, row);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.updated',
          resourceType: 'app',
          resourceId: row.id,
          data: appData(row, parts),
          metadata: changedFields(patch),
        });
        return { app: toApp(row, parts, fullUrl(ctx)), retarget: retarget && !oauth2 };
      },
      { signal: ctx.signal },
    );
    if (retarget) prober.wake();
    return app;
  };
}
