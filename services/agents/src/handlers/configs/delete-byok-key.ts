import { withTransaction } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { recordEvent } from '@workauto/events';
import * as configs from '../../repo/configs.js';
import { SOURCE, blueprintOf, configData, toConfig, type AgentsDeps, type Handler } from '../common.js';

export function deleteByokKey({ pool }: AgentsDeps): Handler<'deleteByokKey'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    return withTransaction(
      pool,
      async (tx) => {
        const row = await configs.clearKey(tx, ctx.tenant, b.id);
        if (!row) throw errors.notFound('agent_config', b.id);
        await recordEvent(tx, SOURCE, ctx, {
          type: 'agent_config.byok_key_removed',
          resourceType: 'agent_config',
          resourceId: row.id,
          data: configData(row),
          metadata: { base_url: null },
        });
        return toConfig(row);
      },
      { signal: ctx.signal },
    );
  };
}
