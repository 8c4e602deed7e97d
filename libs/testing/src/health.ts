import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';

const HealthClient = grpc.makeClientConstructor(healthService, 'grpc.health.v1.Health');
type HealthCheck = (
  req: { service: string },
  opts: grpc.CallOptions,
  cb: (e: grpc.ServiceError | null, r?: { status?: string }) => void,
) => void;

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
