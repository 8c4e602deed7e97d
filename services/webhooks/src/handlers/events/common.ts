import { errors, type CallContext } from '@workauto/grpc';
import * as events from '../../repo/events.js';
import { readableResourceTypes } from '../../domain/visibility.js';

/** An event the caller may read (its domains, domain/visibility.ts); any other is a 404, as another tenant's. */
export async function findReadable(db: Parameters<typeof events.findEvent>[0], ctx: CallContext, id: string) {
  const row = await events.findEvent(db, ctx.tenant, id, readableResourceTypes(ctx));
  if (!row) throw errors.notFound('webhook_event', id);
  return row;
}
