import { checkReturnTo, validate } from '@workauto/grpc';
import type { AppsDeps, Handler } from '../common.js';
import { mustFind } from './common.js';

// An oauth2 app's consent (docs/apps.md "OAuth"): the flows themselves are in ../../oauth/connect.ts.

export function authorizeAppOAuth(deps: AppsDeps): Handler<'authorizeAppOAuth'> {
  const { pool, oauth } = deps;
  return async (req, ctx) => {
    checkReturnTo(validate(), 'return_to', req.return_to, deps.redirects.allowedReturnOrigins).done();
    return oauth.authorize(await mustFind(pool, ctx.tenant, req.slug), req.return_to, ctx);
  };
}
