import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { validate } from '@workauto/grpc';
import { sealed } from '../../credentials.js';
import { SLUG } from '../../domain/auth.js';
import * as apps from '../../repo/apps.js';
import { appData, fullUrl, SOURCE, toApp, type AppsDeps, type Handler } from '../common.js';
import { authOf, mustFind, SLUG_RULE } from './common.js';

export function rotateAppAuth(deps: AppsDeps): Handler<'rotateAppAuth'> {
  const { pool, keyring } = deps;
  return async (req, ctx) => {
    const v = validate().check(SLUG.test(req.slug), 'slug', SLUG_RULE);
    if (!req.auth) v.add('auth', 'is required: {type: bearer | header, secret, header_name?}');
    const auth = authOf(v, req.auth, false);
    v.done();
    const tenantId = ctx.tenant;
    // No probe (spec rule 7): POST /apps/{slug}/probe verifies the new secret.
    return withTransaction(
      pool,
      async (tx) => {
        const current = await mustFind(tx, tenantId, req.slug, 'update');
        const { auth_ciphertext, auth_key_id, auth_hint } = sealed(keyring, tenantId, current.id, auth);
        const row = await apps.updateApp(tx, tenantId, current.id, {
          auth_type: auth.type,
          auth_header_name: auth.headerName,
          auth_ciphertext: auth_ciphertext!,
          auth_key_id: auth_key_id!,
          auth_hint: auth_hint!,
          key_version: current.key_version + 1,
          target_version: current.target_version + 1,
        });
        const tools = (await apps.toolsOf(tx, tenantId, [row.id])).get(row.id)!;
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.auth_rotated',
          resourceType: 'app',
          resourceId: row.id,
          data: appData(row, tools),
          metadata: {
            auth_type: row.auth_type,
            auth_header_name: row.auth_header_name,
            auth_hint: row.auth_hint,
            key_version: row.key_version,
          },
        });
        return toApp(row, tools, fullUrl(ctx));
      },
      { signal: ctx.signal },
    );
  };
}
