import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { validate } from '@workauto/grpc';
import { sealed } from '../../credentials.js';
import * as apps from '../../repo/apps.js';
import { connectHint } from '../../domain/oauth.js';
import { forgetConnection } from '../../repo/oauth.js';
import { appData, fullUrl, partsOne, SOURCE, toApp, type AppsDeps, type Handler } from '../common.js';
import { authOf, mustFind } from './common.js';

export function rotateAppAuth(deps: AppsDeps): Handler<'rotateAppAuth'> {
  const { pool, keyring } = deps;
  return async (req, ctx) => {
    const v = validate();
    if (!req.auth)
      v.add(
        'auth',
        'is required: {type: bearer | header | oauth2, secret?, header_name?, client_id?, client_secret?, scope?}',
      );
    const auth = authOf(v, req.auth, false);
    v.done();
    const tenantId = ctx.tenant;
    // No probe (docs/apps.md "Fields and rules"): POST /apps/{slug}/probe verifies the new secret.
    return withTransaction(
      pool,
      async (tx) => {
        const current = await mustFind(tx, tenantId, req.slug, 'update');
        // An OAuth connection belongs to its client: a new client, or another type, connects again.
        const oauthChange = auth.type === 'oauth2' || current.auth_type === 'oauth2';
        if (oauthChange) await forgetConnection(tx, tenantId, current.id);
        const row = await apps.updateApp(tx, tenantId, current.id, {
          auth_type: auth.type,
          auth_header_name: auth.headerName,
          ...sealed(keyring, tenantId, current.id, auth),
          oauth_client_id: auth.clientId,
          oauth_scope: auth.scope,
          key_version: current.key_version + 1,
          target_version: current.target_version + 1,
          ...(auth.type === 'oauth2'
            ? {
                status: 'needs_authorization' as const,
                status_reason: `the app's OAuth client changed; ${connectHint(current.slug)}`,
              }
            : oauthChange
              ? { status: 'pending' as const, status_reason: null }
              : {}),
        });
        const parts = await partsOne(tx, row);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.auth_rotated',
          resourceType: 'app',
          resourceId: row.id,
          data: appData(row, parts),
          metadata: {
            auth_type: row.auth_type,
            auth_header_name: row.auth_header_name,
            auth_hint: row.auth_hint,
            key_version: row.key_version,
            ...(row.auth_type === 'oauth2'
              ? { oauth_client_id: row.oauth_client_id, oauth_scope: row.oauth_scope }
              : {}),
          },
        });
        return toApp(row, parts, fullUrl(ctx));
      },
      { signal: ctx.signal },
    );
  };
}
