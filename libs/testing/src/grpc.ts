import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { MetadataKeys, decodeStatusDetails, type ErrorDetails } from '@workauto/grpc';

/** Call options acting for a tenant's member through an API key, as the gateway would set them. */
export function callAs(tenantId: string, memberId: string, actorId = 'test-api-key'): { metadata: grpc.Metadata } {
  const md = new grpc.Metadata();
  md.set(MetadataKeys.tenantId, tenantId);
  md.set(MetadataKeys.actorType, 'api_key');
  md.set(MetadataKeys.actorId, actorId);
  md.set(MetadataKeys.memberId, memberId);
  return { metadata: md };
}

/** The error details of a call that must fail. */
export async function failure(p: Promise<unknown>): Promise<ErrorDetails> {
  try {
    await p;
  } catch (err) {
    return decodeStatusDetails(err as grpc.ServiceError);
  }
  assert.fail('expected the call to fail');
}
