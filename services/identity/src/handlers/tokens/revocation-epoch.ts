import { readRevocationEpoch } from '../../repo/revocation-epoch.js';
import type { IdentityDeps, Handler } from '../common.js';

/** What a gateway polls to know when to forget cached credentials, and how long it may trust its cache for writes. */
export function getRevocationEpoch({ pool, writeLease }: IdentityDeps): Handler<'getRevocationEpoch'> {
  return async () => ({ epoch: await readRevocationEpoch(pool), write_lease_ms: writeLease.ms });
}
