import { withTransaction } from '@workauto/db';
import { DomainError, errors } from '@workauto/grpc';
import * as grpc from '@grpc/grpc-js';
import { Keyring } from '@workauto/crypto';
import { recordEvent } from '@workauto/events';
import type { Blueprint } from '../../domain/blueprints.js';
import { INDETERMINATE } from '../../providers/index.js';
import * as configs from '../../repo/configs.js';
import {
  SOURCE,
  blueprintOf,
  configData,
  keyContext,
  toConfig,
  type AgentsDeps,
  type ProviderName,
  type Handler,
} from '../common.js';
import { probeCategory, probe, checkKeyRequest } from './common.js';

/** Why a key of `provider` cannot be stored for a config whose provider field says otherwise, if it cannot. */
function providerConflict(
  b: Blueprint,
  config: configs.ConfigRow | undefined,
  provider: ProviderName,
): string | undefined {
  if (!config?.provider || config.provider === provider) return undefined;
  return `the config runs ${config.provider} (its provider field), so its key must be a ${config.provider} key; send a ${config.provider} key, or first PUT /agent-configs/${b.id} without provider`;
}

export function putByokKey(deps: AgentsDeps): Handler<'putByokKey'> {
  const { pool } = deps;
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    const before = await configs.findConfig(pool, ctx.tenant, b.id);
    const { provider, baseUrl } = checkKeyRequest(deps, req, before?.provider ?? undefined);
    const conflict = providerConflict(b, before, provider);
    if (conflict) throw errors.invalidField('provider', conflict);
    const refusal = await probe(deps, provider, req.api_key, baseUrl, ctx.signal);
    if (refusal) {
      const category = probeCategory(refusal.category);
      if (INDETERMINATE.has(category)) {
        throw errors.unavailable(
          'BYOK_PROBE_UNAVAILABLE',
          `the key could not be checked: ${refusal.message}; nothing was stored and the previous key stays`,
          { category },
        );
      }
      throw new DomainError(
        grpc.status.INVALID_ARGUMENT,
        'BYOK_KEY_INVALID',
        `the key was refused: ${refusal.message}; nothing was stored and the previous key stays`,
        {
          metadata: { category },
          fieldViolations: [{ field: 'api_key', description: refusal.message }],
        },
      );
    }
    const ciphertext = deps.keyring.encrypt(req.api_key, keyContext(ctx.tenant, b.id));
    return withTransaction(
      pool,
      async (tx) => {
        // The config's provider may have changed during the probe: checked again under the row's lock.
        const current = await configs.findConfig(tx, ctx.tenant, b.id, { lock: true });
        const late = providerConflict(b, current, provider);
        if (late) throw errors.invalidField('provider', late);
        const row = await configs.storeKey(tx, ctx.tenant, b.id, {
          provider,
          ciphertext,
          keyId: Keyring.keyIdOf(ciphertext),
          baseUrl,
        });
        await recordEvent(tx, SOURCE, ctx, {
          type: 'agent_config.byok_key_set',
          resourceType: 'agent_config',
          resourceId: row.id,
          data: configData(row),
          metadata: { provider, key_version: row.byok_key_version, base_url: baseUrl },
        });
        return toConfig(row);
      },
      { signal: ctx.signal },
    );
  };
}
