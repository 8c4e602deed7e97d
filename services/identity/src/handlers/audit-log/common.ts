import type { Validator } from '@workauto/grpc';
import * as audit from '../../repo/audit-log.js';

/**
 * The filters a list or export request carries, for the repo. Each filter's own rules (lengths, UUIDs)
 * are in the proto, checked before a handler runs; the window's order is checked here (violations go to `v`).
 */
export function auditFilter(req: audit.AuditFilter, v: Validator): audit.AuditFilter {
  if (req.from && req.to && req.to.getTime() <= req.from.getTime())
    v.add('to', 'must be after from (from is inclusive, to exclusive): swap them or widen the window');
  return {
    action: req.action,
    resource_type: req.resource_type,
    actor_id: req.actor_id,
    // Stored as PostgreSQL writes a uuid: lowercase.
    resource_id: req.resource_id?.toLowerCase(),
    member_id: req.member_id?.toLowerCase(),
    from: req.from,
    to: req.to,
  };
}
