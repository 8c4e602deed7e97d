import { errors, parsePage, toPage, validate, checkEnum } from '@workauto/grpc';
import type { StageType } from '../../repo/stages.js';
import * as deals from '../../repo/deals.js';
import * as history from '../../repo/history.js';
import { LIMITS, dealStatuses, toDeal, toHistory, type CrmDeps, type Handler } from '../common.js';

export function listDeals(deps: CrmDeps): Handler<'listDeals'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const v = validate()
      .uuid('pipeline_id', req.pipeline_id)
      .uuid('stage_id', req.stage_id)
      .uuid('owner_id', req.owner_id)
      .uuid('contact_id', req.contact_id);
    checkEnum(v, 'status', req.status, dealStatuses, false).done();
    const page = parsePage(req);
    const listed = await deals.listDeals(
      pool,
      ctx.tenant,
      {
        pipeline_id: req.pipeline_id || undefined,
        stage_id: req.stage_id || undefined,
        status: dealStatuses.toDomain(req.status) as StageType | undefined,
        owner_id: req.owner_id || undefined,
        contact_id: req.contact_id || undefined,
      },
      page,
    );
    return toPage(listed, toDeal);
  };
}

export function getDeal(deps: CrmDeps): Handler<'getDeal'> {
  const { pool } = deps;
  return async (req, ctx) => {
    validate().uuid('id', req.id, { required: true }).done();
    const row = await deals.findDeal(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('deal', req.id);
    return toDeal(row);
  };
}

export function listDealHistory(deps: CrmDeps): Handler<'listDealHistory'> {
  const { pool } = deps;
  return async (req, ctx) => {
    validate().uuid('id', req.id, { required: true }).done();
    const deal = await deals.findDeal(pool, ctx.tenant, req.id);
    if (!deal) throw errors.notFound('deal', req.id);
    return { data: (await history.listHistory(pool, ctx.tenant, deal.id, LIMITS.historyEntries)).map(toHistory) };
  };
}
