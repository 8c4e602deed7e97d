import { errors } from '@workauto/grpc';
import { fullUrl, toApp, type AppsDeps, type Handler } from '../common.js';
import { mustFind } from './common.js';

export function probeApp(deps: AppsDeps): Handler<'probeApp'> {
  const { pool, prober } = deps;
  return async (req, ctx) => {
    const current = await mustFind(pool, ctx.tenant, req.slug);
    const after = await prober.probe(ctx.tenant, current.id, ctx, { signal: ctx.signal });
    if (!after) throw errors.notFound('app', req.slug);
    return toApp(after.row, after.parts, fullUrl(ctx));
  };
}
