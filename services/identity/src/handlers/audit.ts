import { parsePage, toPage, validate, type Handlers } from '@workauto/grpc';
import type { AuditLogEntry, IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import * as audit from '../repo/audit-log.js';
import type { IdentityDeps } from './common.js';

type H = Handlers<typeof IdentityServiceService>;

export function toAuditEntry(r: audit.AuditRow): AuditLogEntry {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    action: r.action,
    actor_id: r.actor_id,
    actor_type: r.actor_type,
    created_at: r.created_at,
    metadata: r.metadata,
    ip_address: r.ip_address ?? undefined,
    resource_id: r.resource_id ?? undefined,
    resource_type: r.resource_type ?? undefined,
    user_agent: r.user_agent ?? undefined,
  };
}

/** Checks the filters a list or export request carries (400 naming each bad one) and returns them for the repo. */
export function auditFilter(req: audit.AuditFilter): audit.AuditFilter {
  const v = validate()
    .text('action', req.action, { max: 200 })
    .text('resource_type', req.resource_type, { max: 200 })
    .text('actor_id', req.actor_id, { max: 200 })
    .uuid('resource_id', req.resource_id)
    .check(req.resource_id !== '', 'resource_id', 'must be a UUID; leave it out for every resource');
  if (req.from && req.to && req.to.getTime() <= req.from.getTime())
    v.add('to', 'must be after from (from is inclusive, to exclusive): swap them or widen the window');
  v.done();
  return {
    action: req.action,
    resource_type: req.resource_type,
    actor_id: req.actor_id,
    // Stored as PostgreSQL writes a uuid: lowercase.
    resource_id: req.resource_id?.toLowerCase(),
    from: req.from,
    to: req.to,
  };
}

export function auditHandlers({ pool }: IdentityDeps): Pick<H, 'listAuditLog'> {
  return {
    async listAuditLog(req, ctx) {
      const filter = auditFilter(req);
      const page = parsePage(req);
      return toPage(await audit.listAuditLog(pool, ctx.tenant, filter, page), toAuditEntry);
    },
  };
}
