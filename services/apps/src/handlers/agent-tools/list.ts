import * as apps from '../../repo/apps.js';
import type { AppsDeps, Handler } from '../common.js';

export function listAgentTools(deps: AppsDeps): Handler<'listAgentTools'> {
  const { pool } = deps;
  return async (_req, ctx) => {
    const rows = await apps.agentTools(pool, ctx.tenant);
    return {
      tools: rows.map((r) => ({
        app_slug: r.slug,
        name: r.name,
        description: r.description ?? '',
        input_schema: r.input_schema,
      })),
    };
  };
}
