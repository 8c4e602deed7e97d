import type { Validator } from '@workauto/grpc';
import * as audit from '../../repo/audit-log.js';

/** Checks the filters a list or export request carries (violations go to `v`) and returns them for the repo. */
export function auditFilter(req: audit.AuditFilter, v: Validator): audit.AuditFilter {
  v.text('action', req.action, { max: 200 })
    .text('resource_type', req.resource_type, { max: 200 })
    .text('actor_id', req.actor_id, { max: 200 })
    .uuid('resource_id', req.resource_id)
    .check(req.resource_id !== '', 'resource_id', 'must be a UUID; leave it out for every resource')
    .uuid('member_id', req.member_id)
    .check(req.member_id !== '', 'member_id', "must be a member's id (a UUID); leave it out for every member");
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
