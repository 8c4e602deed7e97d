import { setTimeout as sleep } from 'node:timers/promises';
import type { Keyring } from '@workauto/crypto';
import { Keyring as K } from '@workauto/crypto';
import type { Pool } from '@workauto/db';
import type { Logger } from '@workauto/logger';
import type { Worker } from '@workauto/service';
import { keyContext } from '../handlers/common.js';
import * as configs from '../repo/configs.js';

/**
 * After a keyring rotation (a new first key in ENCRYPTION_KEYS), re-encrypts every stored provider
 * key under the active key at start-up, so the old key can be dropped once this ran. Idempotent;
 * each key is rewritten only if it is still the ciphertext that was read.
 */
export async function rewrapKeys(pool: Pool, keyring: Keyring, signal?: AbortSignal): Promise<number> {
  let rewrapped = 0;
  for (;;) {
    if (signal?.aborted) return rewrapped;
    const batch = await configs.keysNotUnder(pool, keyring.activeKeyId, 100);
    if (!batch.length) return rewrapped;
    for (const row of batch) {
      const context = keyContext(row.tenant_id, row.agent_blueprint);
      const ciphertext = keyring.encrypt(keyring.decrypt(row.byok_ciphertext, context), context);
      if (await configs.rewrapKey(pool, row.id, row.byok_ciphertext, { ciphertext, keyId: K.keyIdOf(ciphertext) }))
        rewrapped++;
    }
  }
}

export function rewrapKeysWorker(pool: Pool, keyring: Keyring, logger: Logger): Worker {
  return {
    name: 'rewrap-provider-keys',
    async run(ctx) {
      ctx.beat();
      const n = await rewrapKeys(pool, keyring, ctx.signal);
      if (n)
        logger.info(
          { rewrapped: n, key_id: keyring.activeKeyId },
          'provider keys re-encrypted under the active keyring key',
        );
      // Done; idle (beating) until shutdown.
      while (!ctx.signal.aborted) {
        ctx.beat();
        await sleep(10_000, undefined, { signal: ctx.signal }).catch(() => undefined);
      }
    },
  };
}
