import { withTransaction } from '@workauto/db';
import { errors, validate } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import { effectiveAccess } from '../../domain/access.js';
import { assertAccessWithin, assertNotOutranked, assertNotOwn } from '../../domain/grants.js';
import { assertNoResourceFilters, policyViolations, type PolicyInput } from '../../domain/policies.js';
import * as members from '../../repo/members.js';
import * as policies from '../../repo/access-policies.js';
import {
  SOURCE,
  accessOf,
  accessPoliciesData,
  caller,
  levels,
  toPolicy,
  type IdentityDeps,
  type Handler,
} from '../common.js';

export function replaceAccessPolicies({ pool }: IdentityDeps): Handler<'replaceAccessPolicies'> {
  return async (req, ctx) => {
    const inputs = req.policies.map((p) => ({
      domain: p.domain,
      access_level: levels.toDomain(p.access_level),
    }));
    assertNoResourceFilters('policies', req.policies);
    const v = validate();
    for (const violation of policyViolations('policies', inputs)) v.add(violation.field, violation.description);
    v.done();
    return withTransaction(
      pool,
      async (tx) => {
        const me = await caller(tx, ctx);
        const target = await members.findMember(tx, ctx.tenant, req.member_id, { forUpdate: true });
        if (!target) throw errors.notFound('member', req.member_id);
        assertNotOwn(me, target.id, 'access policies');
        assertNotOutranked(me, target, 'change the access policies');
        assertAccessWithin(me, await accessOf(tx, target), effectiveAccess(target.role, inputs as PolicyInput[]));
        const rows = await policies.replacePolicies(tx, ctx.tenant, target.id, inputs as PolicyInput[]);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'access_policies.replaced',
          resourceType: 'member',
          resourceId: target.id,
          data: accessPoliciesData(rows),
          metadata: { policies: inputs.map((p) => `${p.domain}:${p.access_level}`) },
        });
        return { data: rows.map(toPolicy) };
      },
      { signal: ctx.signal },
    );
  };
}
