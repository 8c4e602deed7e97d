import { parsePage, toPage } from '@workauto/grpc';
import * as apps from '../../repo/apps.js';
import { fullUrl, partsOf, toApp, type AppsDeps, type Handler } from '../common.js';

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
