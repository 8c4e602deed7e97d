import { parsePage, toPage, validate } from '@workauto/grpc';
import type { AuditLogEntry } from '@workauto/protos/workauto/identity/v1/identity.js';
import * as audit from '../../repo/audit-log.js';
import type { IdentityDeps, Handler } from '../common.js';
import { auditFilter } from './common.js';

function toAuditEntry(r: audit.AuditRow): AuditLogEntry {
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
    member_id: r.member_id ?? undefined,
  };
}

export function listAuditLog({ pool }: IdentityDeps): Handler<'listAuditLog'> {
  return async (req, ctx) => {
    const v = validate();
    const filter = auditFilter(req, v);
    v.done();
    const page = parsePage(req);
    return toPage(await audit.listAuditLog(pool, ctx.tenant, filter, page), toAuditEntry);
  };
}
