import type { AppsDeps, Handler } from '../common.js';

export function completeAppOAuth(deps: AppsDeps): Handler<'completeAppOAuth'> {
  return (req, ctx) => deps.oauth.complete(req, ctx);
}
