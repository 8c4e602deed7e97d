import { errors } from '@workauto/grpc';
import * as events from '../../repo/events.js';
import type { Handler } from '../common.js';
import { lower, view, type EventDeps } from './common.js';

export function getEvent(deps: EventDeps): Handler<'getEvent'> {
  return async (req, ctx) => {
    const row = await events.findEvent(deps.pool, ctx.tenant, lower(req.id));
    if (!row) throw errors.notFound('event', req.id);
    return view(deps, deps.pool, ctx.tenant, row);
  };
}
