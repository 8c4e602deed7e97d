/**
 * `helm test`: checks an installation from inside the cluster. Every service's gRPC health must
 * answer SERVING and the gateway's /readyz 200; prints one line per check and exits 1 on any failure.
 *   GATEWAY_URL=http://…-gateway:80 GRPC_SERVICES=identity=…-identity:50051,… node libs/service/dist/installation-check.js
 */
import { pathToFileURL } from 'node:url';
import { Downstream } from '@workauto/grpc';

export interface InstallationCheck {
  target: string;
  ok: boolean;
  detail: string;
}

export async function checkInstallation(opts: {
  gatewayUrl: string;
  services: Record<string, string>;
  timeoutMs?: number;
}): Promise<InstallationCheck[]> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const services = Object.entries(opts.services).map(async ([name, address]): Promise<InstallationCheck> => {
    const client = new Downstream(name, address, { healthTimeoutMs: timeoutMs });
    try {
      const state = await client.checkHealth();
      return {
        target: `${name} (${address})`,
        ok: state === 'serving',
        detail:
          state === 'serving'
            ? 'SERVING'
            : `health check ${state}: is the service running and ready (kubectl get pods)?`,
      };
    } finally {
      client.close();
    }
  });
  const gateway = (async (): Promise<InstallationCheck> => {
    const url = new URL('/readyz', opts.gatewayUrl).toString();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      const body = await res.text();
      return { target: `gateway (${url})`, ok: res.status === 200, detail: `${res.status} ${body.slice(0, 300)}` };
    } catch (err) {
      return { target: `gateway (${url})`, ok: false, detail: `no answer: ${(err as Error).message}` };
    }
  })();
  return Promise.all([...services, gateway]);
}

/** GRPC_SERVICES: name=host:port[,…] */
export function parseServices(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((entry) => {
        const at = entry.indexOf('=');
        if (at < 1) throw new Error(`GRPC_SERVICES entry "${entry}" is not name=host:port`);
        return [entry.slice(0, at), entry.slice(at + 1)];
      }),
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const gatewayUrl = process.env.GATEWAY_URL;
  if (!gatewayUrl) {
    console.error('GATEWAY_URL is required (http://<gateway service>:<port>)');
    process.exit(1);
  }
  const results = await checkInstallation({ gatewayUrl, services: parseServices(process.env.GRPC_SERVICES ?? '') });
  for (const r of results) console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.target}: ${r.detail}`);
  process.exit(results.every((r) => r.ok) ? 0 : 1);
}
