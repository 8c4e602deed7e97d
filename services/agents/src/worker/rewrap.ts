import type { Keyring } from '@workauto/crypto';
import { Keyring as K } from '@workauto/crypto';
import type { Pool } from '@workauto/db';
import { PeriodicWorker, type Clock } from '@workauto/jobs';
import type { Logger } from '@workauto/logger';
import { keyContext } from '../handlers/common.js';
import * as configs from '../repo/configs.js';

/**
 * After a keyring rotation (a new first key in ENCRYPTION_KEYS), re-encrypts every stored provider
 * key under the active key, so the old key can be dropped once this ran. Idempotent;
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

/**
 * Every replica rewraps with its own keyring when it starts, then hourly: a key stored meanwhile
 * by a replica that still ran with the previous keyring (a rolling rotation) is rewrapped too.
 */
export function rewrapKeysWorker(pool: Pool, keyring: Keyring, logger: Logger, clock?: Clock): PeriodicWorker {
  return new PeriodicWorker({
    name: 'rewrap-provider-keys',
    replicas: 'every',
    everyMs: 3_600_000,
    logger,
    ...(clock ? { clock } : {}),
    tick: async ({ signal }) => {
      const n = await rewrapKeys(pool, keyring, signal);
      if (n)
        logger.info(
          { rewrapped: n, key_id: keyring.activeKeyId },
          'provider keys re-encrypted under the active keyring key',
        );
    },
  });
}
