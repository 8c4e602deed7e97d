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

export function auditHandlers({ pool }: IdentityDeps): Pick<H, 'listAuditLog'> {
  return {
    async listAuditLog(req, ctx) {
      validate().text('action', req.action, { max: 200 }).text('resource_type', req.resource_type, { max: 200 }).done();
      const page = parsePage(req);
      const listed = await audit.listAuditLog(
        pool,
        ctx.tenant,
        { action: req.action, resource_type: req.resource_type },
        page,
      );
      return toPage(listed, toAuditEntry);
    },
  };
}
