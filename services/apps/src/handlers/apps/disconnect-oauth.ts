import { fullUrl, toApp, type AppsDeps, type Handler } from '../common.js';
import { mustFind } from './common.js';

export function disconnectAppOAuth(deps: AppsDeps): Handler<'disconnectAppOAuth'> {
  const { pool, oauth } = deps;
  return async (req, ctx) => {
    const { row, parts } = await oauth.disconnect(await mustFind(pool, ctx.tenant, req.slug), ctx);
    return toApp(row, parts, fullUrl(ctx));
  };
}
