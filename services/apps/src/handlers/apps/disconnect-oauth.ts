import { fullUrl, toApp, type AppsDeps, type Handler } from '../common.js';
import { checkSlug, mustFind } from './common.js';

export function disconnectAppOAuth(deps: AppsDeps): Handler<'disconnectAppOAuth'> {
  const { pool, oauth } = deps;
  return async (req, ctx) => {
    checkSlug(req.slug);
    const { row, parts } = await oauth.disconnect(await mustFind(pool, ctx.tenant, req.slug), ctx);
    return toApp(row, parts, fullUrl(ctx));
  };
}
