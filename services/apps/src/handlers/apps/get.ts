import { fullUrl, type AppsDeps, type Handler } from '../common.js';
import { checkSlug, mustFind, viewOf } from './common.js';

export function getApp(deps: AppsDeps): Handler<'getApp'> {
  const { pool } = deps;
  return async (req, ctx) => {
    checkSlug(req.slug);
    return viewOf(pool, await mustFind(pool, ctx.tenant, req.slug), fullUrl(ctx));
  };
}
