import { withTransaction } from '@workauto/db';
import { recordEvent } from '@workauto/events';
import * as apps from '../../repo/apps.js';
import { SOURCE, type AppsDeps, type Handler } from '../common.js';
import { mustFind } from './common.js';

export function deleteApp(deps: AppsDeps): Handler<'deleteApp'> {
  const { pool } = deps;
  return async (req, ctx) => {
    await withTransaction(
      pool,
      async (tx) => {
        const current = await mustFind(tx, ctx.tenant, req.slug, 'update');
        await apps.deleteApp(tx, ctx.tenant, current.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'app.deleted',
          resourceType: 'app',
          resourceId: current.id,
          metadata: { slug: current.slug },
        });
      },
      { signal: ctx.signal },
    );
    return {};
  };
}
