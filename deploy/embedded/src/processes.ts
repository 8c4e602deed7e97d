/**
 * The product as a cluster runs it: each service's own main.js in its own process, configured only
 * by environment variables (as the Helm chart sets them). For the deployment-shape test and the
 * benchmarks; make dev runs everything in one process instead (startStack).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureDatabase } from '@workauto/db';
import { Downstream, generateCallerKeys } from '@workauto/grpc';
import { freePort } from '@workauto/testing';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Start order; stopped in reverse (the gateway first). */
const SERVICES = ['identity', 'notes-tasks', 'crm-pipelines', 'gateway'] as const;

export interface ServiceProcesses {
  /** http://127.0.0.1:<port> of the gateway. */
  url: string;
  /** Each process's port (gRPC for services, HTTP for the gateway). */
  ports: Record<(typeof SERVICES)[number], number>;
  /** Each process and what it printed (for failure messages). */
  children: Map<string, { proc: ChildProcess; output: string[] }>;
  /** SIGTERM each, gateway first; resolves to the exit codes by service. */
  stop(): Promise<Record<string, number | null>>;
}

export async function startServiceProcesses(opts: {
  databaseServerUrl: string;
  databasePrefix: string;
  platformAdminToken: string;
  encryptionKeys: string;
  kafkaBrokers?: string | undefined;
  env?: Record<string, string>;
}): Promise<ServiceProcesses> {
  const db = (s: string) => ensureDatabase(opts.databaseServerUrl, `${opts.databasePrefix}_${s}`);
  const ports = { identity: await freePort(), 'notes-tasks': await freePort(), 'crm-pipelines': await freePort(), gateway: await freePort() };
  const callerKeys = generateCallerKeys('gateway');
  const grpc = { ENCRYPTION_KEYS: opts.encryptionKeys, GRPC_HOST: '127.0.0.1', CALLER_VERIFY_KEYS: callerKeys.verifyKeys };
  const envs: Record<(typeof SERVICES)[number], Record<string, string>> = {
    identity: { ...grpc, DATABASE_URL: await db('identity'), GRPC_PORT: String(ports.identity), PLATFORM_ADMIN_TOKEN: opts.platformAdminToken },
    'notes-tasks': { ...grpc, DATABASE_URL: await db('notes_tasks'), GRPC_PORT: String(ports['notes-tasks']) },
    'crm-pipelines': { ...grpc, DATABASE_URL: await db('crm_pipelines'), GRPC_PORT: String(ports['crm-pipelines']) },
    gateway: {
      ENCRYPTION_KEYS: opts.encryptionKeys, DATABASE_URL: await db('gateway'), HOST: '127.0.0.1', PORT: String(ports.gateway), CALLER_SIGNING_KEY: callerKeys.signingKey,
      IDENTITY_ADDR: `127.0.0.1:${ports.identity}`, NOTES_TASKS_ADDR: `127.0.0.1:${ports['notes-tasks']}`, CRM_PIPELINES_ADDR: `127.0.0.1:${ports['crm-pipelines']}`,
    },
  };
  const children = new Map<string, { proc: ChildProcess; output: string[] }>();
  for (const name of SERVICES) {
    const proc = spawn(process.execPath, [`services/${name}/dist/main.js`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...(opts.kafkaBrokers ? { KAFKA_BROKERS: opts.kafkaBrokers } : {}), ...envs[name], ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    proc.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
    proc.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
    children.set(name, { proc, output });
  }
  const url = `http://127.0.0.1:${ports.gateway}`;
  const kill = () => { for (const { proc } of children.values()) if (proc.exitCode === null) proc.kill('SIGKILL'); };
  // Ready = the gateway is ready and every service's gRPC health check answers SERVING (the
  // gateway's readiness is about the gateway alone).
  const services = (['identity', 'notes-tasks', 'crm-pipelines'] as const).map((name) => new Downstream(name, `127.0.0.1:${ports[name]}`));
  const allServing = async () => (await Promise.all(services.map((d) => d.checkHealth()))).every((h) => h === 'serving');
  try {
    for (let i = 0; ; i++) {
      if ((await fetch(`${url}/readyz`).then((r) => r.ok, () => false)) && (await allServing())) break;
      const dead = [...children].find(([, c]) => c.proc.exitCode !== null);
      if (dead || i >= 600) {
        kill();
        throw new Error(dead ? `${dead[0]} exited during start-up:\n${dead[1].output.join('')}` : 'the services were not ready within 60 s');
      }
      await sleep(100);
    }
  } finally {
    for (const d of services) d.close();
  }
  return {
    url,
    ports,
    children,
    async stop() {
      const codes: Record<string, number | null> = {};
      for (const name of [...SERVICES].reverse()) {
        const { proc } = children.get(name)!;
        if (proc.exitCode !== null) {
          codes[name] = proc.exitCode;
          continue;
        }
        const exited = once(proc, 'exit');
        proc.kill('SIGTERM');
        codes[name] = ((await exited) as [number | null])[0];
      }
      return codes;
    },
  };
}
