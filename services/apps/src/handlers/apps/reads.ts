import { parsePage, toPage } from '@workauto/grpc';
import * as apps from '../../repo/apps.js';
import { fullUrl, partsOf, toApp, type AppsDeps, type Handler } from '../common.js';
import { mustFind, viewOf } from './common.js';

export function listApps(deps: AppsDeps): Handler<'listApps'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const page = parsePage(req);
    const result = await apps.listApps(pool, ctx.tenant, page);
    const parts = await partsOf(
      pool,
      ctx.tenant,
      result.rows.map((r) => r.id),
    );
    const full = fullUrl(ctx);
    return toPage(result, (row) => toApp(row, parts.get(row.id)!, full));
  };
}

export function getApp(deps: AppsDeps): Handler<'getApp'> {
  const { pool } = deps;
  return async (req, ctx) => {
    return viewOf(pool, await mustFind(pool, ctx.tenant, req.slug), fullUrl(ctx));
  };
}

export function listAgentTools(deps: AppsDeps): Handler<'listAgentTools'> {
  const { pool } = deps;
  return async (_req, ctx) => {
    const rows = await apps.agentTools(pool, ctx.tenant);
    return {
      tools: rows.map((r) => ({
        app_slug: r.slug,
        name: r.name,
        description: r.description ?? '',
        input_schema: r.input_schema,
      })),
    };
  };
}
