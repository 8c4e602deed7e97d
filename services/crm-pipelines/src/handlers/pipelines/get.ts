import { errors } from '@workauto/grpc';
import * as pipelines from '../../repo/pipelines.js';
import * as stages from '../../repo/stages.js';
import { toPipeline, type CrmDeps, type Handler } from '../common.js';

export function getPipeline({ pool }: CrmDeps): Handler<'getPipeline'> {
  return async (req, ctx) => {
    const row = await pipelines.findPipeline(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('pipeline', req.id);
    return toPipeline(row, await stages.listStages(pool, ctx.tenant, [row.id]));
  };
}
