import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
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

const HealthClient = grpc.makeClientConstructor(healthService as unknown as grpc.ServiceDefinition, 'grpc.health.v1.Health');
type HealthCheck = (req: { service: string }, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: { status?: string }) => void) => void;

/** The gRPC health status of `service` at host:port, as Kubernetes' grpc probe asks it ('error: …' when unreachable). */
export function healthStatus(address: string, service: string): Promise<string> {
  const client = new HealthClient(address, grpc.credentials.createInsecure());
  return new Promise<string>((resolve) => {
    (client as unknown as { check: HealthCheck }).check({ service }, { deadline: Date.now() + 2_000 }, (err, res) => {
      client.close();
      resolve(err ? `error: ${err.message}` : (res?.status ?? 'none'));
    });
  });
}
