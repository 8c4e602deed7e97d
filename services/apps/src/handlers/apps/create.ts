import { newId, withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import { errors, textOrNull, validate } from '@workauto/grpc';
import { sealed } from '../../credentials.js';
import { connectHint } from '../../domain/oauth.js';
import * as apps from '../../repo/apps.js';
import { appData, fullUrl, SOURCE, toApp, type AppParts, type AppsDeps, type Handler } from '../common.js';
import { authOf } from './common.js';

/** A new app has no tools and no OAuth connection yet. */
const NO_PARTS: AppParts = { tools: [], oauth: undefined };

export function createApp(deps: AppsDeps): Handler<'createApp'> {
  const { pool, keyring, egress, prober } = deps;
  return async (req, ctx) => {
    const v = validate();
    const auth = authOf(v, req.auth, true);
    v.done();
    // Checked and stored as sent: whitespace anywhere (surrounding too) is refused, never trimmed away.
    egress.checkUrl(req.mcp_server_url, 'mcp_server_url');
    const url = req.mcp_server_url;
    const tenantId = ctx.tenant;
    const id = newId();
    const oauth2 = auth.type === 'oauth2';
    const app = await withTransaction(
      pool,
      async (tx) => {
        const row = await apps.insertApp(tx, {
          id,
          tenant_id: tenantId,
          slug: req.slug,
          display_name: req.display_name.trim(),
          description: textOrNull(req.description) ?? null,
          mcp_server_url: url,
          auth_type: auth.type,
          auth_header_name: auth.headerName,
          ...sealed(keyring, tenantId, id, auth),
          oauth_client_id: auth.clientId,
          oauth_scope: auth.scope,
          key_version: auth.secret ? 1 : 0,
          metadata: req.metadata ?? {},
          // An oauth2 app has nothing to probe with until an admin connects it.
          ...(oauth2
            ? { status: 'needs_authorization', status_reason: `the app is not connected yet; ${connectHint(req.slug)}` }
            : { status: 'pending', status_reason: null }),
        });
        if (!row)
          throw errors.alreadyExists(
            'APP_SLUG_TAKEN',
            `an app with slug ${req.slug} already exists; choose another slug or PATCH /api/v1/apps/${req.slug}`,
            { slug: req.slug },
          );
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.created',
          resourceType: 'app',
          resourceId: row.id,
          data: appData(row, NO_PARTS),
          metadata: {
            slug: row.slug,
            display_name: row.display_name,
            mcp_server_url: row.mcp_server_url,
            auth_type: row.auth_type,
          },
        });
        return toApp(row, NO_PARTS, fullUrl(ctx));
      },
      { signal: ctx.signal },
    );
    if (!oauth2) prober.wake(); // its first probe is due now
    return app;
  };
}
