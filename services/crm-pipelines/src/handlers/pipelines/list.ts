import { parsePage, toPage } from '@workauto/grpc';
import * as pipelines from '../../repo/pipelines.js';
import { toPipeline, type CrmDeps, type Handler } from '../common.js';
import { stagesByPipeline } from './common.js';

export function listPipelines({ pool }: CrmDeps): Handler<'listPipelines'> {
  return async (req, ctx) => {
    const page = parsePage(req);
    const listed = await pipelines.listPipelines(pool, ctx.tenant, page);
    const by = await stagesByPipeline(
      pool,
      ctx.tenant,
      listed.rows.map((r) => r.id),
    );
    return toPage(listed, (r) => toPipeline(r, by.get(r.id) ?? []));
  };
}
