import { fullUrl, type AppsDeps, type Handler } from '../common.js';
import { mustFind, viewOf } from './common.js';

export function getApp(deps: AppsDeps): Handler<'getApp'> {
  const { pool } = deps;
  return async (req, ctx) => {
    return viewOf(pool, await mustFind(pool, ctx.tenant, req.slug), fullUrl(ctx));
  };
}
