import { withTransaction, newId } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import * as members from '../../repo/members.js';
import * as tenants from '../../repo/tenants.js';
import { SOURCE, apiKeyData, memberData, tenantData, toMember, type IdentityDeps, type Handler } from '../common.js';
import { issueApiKey } from '../api-keys/common.js';

export function createTenant({ pool }: IdentityDeps): Handler<'createTenant'> {
  return async (req, ctx) => {
    const owner = req.owner!;
    return withTransaction(
      pool,
      async (tx) => {
        const tenant = await tenants.insertTenant(tx, { id: newId(), name: req.name.trim() });
        const member = await members.insertMember(tx, {
          id: newId(),
          tenant_id: tenant.id,
          name: owner.name.trim(),
          email: owner.email.trim(),
          role: 'owner',
        });
        const { key, row: keyRow } = await issueApiKey(tx, tenant.id, member.id, 'owner key');
        const ev = { tenantId: tenant.id };
        await recordEvent(tx, SOURCE, ctx, {
          ...ev,
          type: 'tenant.created',
          resourceType: 'tenant',
          resourceId: tenant.id,
          data: tenantData(tenant),
        });
        await recordEvent(tx, SOURCE, ctx, {
          ...ev,
          type: 'member.created',
          resourceType: 'member',
          resourceId: member.id,
          data: memberData(member),
        });
        await recordEvent(tx, SOURCE, ctx, {
          ...ev,
          type: 'api_key.created',
          resourceType: 'api_key',
          resourceId: keyRow.id,
          data: apiKeyData(keyRow),
        });
        return {
          tenant: { id: tenant.id, name: tenant.name, created_at: tenant.created_at },
          member: toMember(member),
          api_key: key,
        };
      },
      { signal: ctx.signal },
    );
  };
}
