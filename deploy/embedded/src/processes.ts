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
import { generateCallerKeys, mergeVerifyKeys } from '@workauto/grpc';
import { freePort, healthStatus } from '@workauto/testing';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Start order; stopped in reverse (the gateway first). */
const SERVICES = [
  'identity',
  'notes-tasks',
  'crm-pipelines',
  'webhooks',
  'apps',
  'calendar',
  'agents',
  'gateway',
] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface ServiceProcesses {
  /** http://127.0.0.1:<port> of the gateway. */
  url: string;
  /** Each process's port (gRPC for services, HTTP for the gateway). */
  ports: Record<(typeof SERVICES)[number], number>;
  /** Each process and what it printed (for failure messages). */
  children: Map<string, { proc: ChildProcess; output: string[] }>;
  /** host:port of each gRPC service. */
  grpcAddresses: Record<Exclude<ServiceName, 'gateway'>, string>;
  /** Resolves once every service reports readiness SERVING and the gateway answers; rejects if a process exits. */
  ready(timeoutMs?: number): Promise<void>;
  /** What every process printed, for assertion messages. */
  output(): string;
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
  /** DATABASE_URL of a service whose database lives elsewhere (e.g. on a server a test stops); made by the caller. */
  databaseUrls?: Partial<Record<ServiceName, string>>;
  /** Return at once instead of waiting for ready() (a start while a database is down). */
  noWait?: boolean;
  /** More processes of a service beside the first (same database and env, own port), e.g. {webhooks: 1}. */
  extraReplicas?: Partial<Record<Exclude<ServiceName, 'gateway'>, number>>;
  /** The built checkout whose services/<name>/dist/main.js run (default this one; the upgrade test runs the previous release's). */
  root?: string;
}): Promise<ServiceProcesses> {
  const db = async (service: ServiceName, database: string) =>
    opts.databaseUrls?.[service] ?? ensureDatabase(opts.databaseServerUrl, `${opts.databasePrefix}_${database}`);
  const ports = {
    identity: await freePort(),
    'notes-tasks': await freePort(),
    'crm-pipelines': await freePort(),
    webhooks: await freePort(),
    apps: await freePort(),
    calendar: await freePort(),
    agents: await freePort(),
    gateway: await freePort(),
  };
  const grpcAddresses = {
    identity: `127.0.0.1:${ports.identity}`,
    'notes-tasks': `127.0.0.1:${ports['notes-tasks']}`,
    'crm-pipelines': `127.0.0.1:${ports['crm-pipelines']}`,
    webhooks: `127.0.0.1:${ports.webhooks}`,
    apps: `127.0.0.1:${ports.apps}`,
    calendar: `127.0.0.1:${ports.calendar}`,
    agents: `127.0.0.1:${ports.agents}`,
  };
  const callerKeys = generateCallerKeys('gateway');
  // agents calls notes-tasks, crm-pipelines, calendar and apps as a run's agent with a key of its own.
  const agentsKeys = generateCallerKeys('agents');
  const verifyKeys = mergeVerifyKeys(callerKeys.verifyKeys, agentsKeys.verifyKeys);
  const grpc = { ENCRYPTION_KEYS: opts.encryptionKeys, GRPC_HOST: '127.0.0.1', CALLER_VERIFY_KEYS: verifyKeys };
  const envs: Record<(typeof SERVICES)[number], Record<string, string>> = {
    identity: {
      ...grpc,
      DATABASE_URL: await db('identity', 'identity'),
      GRPC_PORT: String(ports.identity),
      PLATFORM_ADMIN_TOKEN: opts.platformAdminToken,
    },
    'notes-tasks': {
      ...grpc,
      DATABASE_URL: await db('notes-tasks', 'notes_tasks'),
      GRPC_PORT: String(ports['notes-tasks']),
    },
    'crm-pipelines': {
      ...grpc,
      DATABASE_URL: await db('crm-pipelines', 'crm_pipelines'),
      GRPC_PORT: String(ports['crm-pipelines']),
    },
    // Receivers in tests and benchmarks listen on loopback (the chart refuses private addresses).
    webhooks: {
      ...grpc,
      DATABASE_URL: await db('webhooks', 'webhooks'),
      GRPC_PORT: String(ports.webhooks),
      EGRESS_ALLOW_PRIVATE: 'true',
    },
    // MCP servers of the tests run on loopback.
    apps: {
      ...grpc,
      DATABASE_URL: await db('apps', 'apps'),
      GRPC_PORT: String(ports.apps),
      EGRESS_ALLOW_PRIVATE: 'true',
    },
    calendar: { ...grpc, DATABASE_URL: await db('calendar', 'calendar'), GRPC_PORT: String(ports.calendar) },
    agents: {
      ...grpc,
      DATABASE_URL: await db('agents', 'agents'),
      GRPC_PORT: String(ports.agents),
      CALLER_SIGNING_KEY: agentsKeys.signingKey,
      NOTES_TASKS_ADDR: grpcAddresses['notes-tasks'],
      CRM_PIPELINES_ADDR: grpcAddresses['crm-pipelines'],
      APPS_ADDR: grpcAddresses.apps,
      CALENDAR_ADDR: grpcAddresses.calendar,
    },
    gateway: {
      ENCRYPTION_KEYS: opts.encryptionKeys,
      DATABASE_URL: await db('gateway', 'gateway'),
      HOST: '127.0.0.1',
      PORT: String(ports.gateway),
      CALLER_SIGNING_KEY: callerKeys.signingKey,
      IDENTITY_ADDR: grpcAddresses.identity,
      NOTES_TASKS_ADDR: grpcAddresses['notes-tasks'],
      CRM_PIPELINES_ADDR: grpcAddresses['crm-pipelines'],
      WEBHOOKS_ADDR: grpcAddresses.webhooks,
      APPS_ADDR: grpcAddresses.apps,
      CALENDAR_ADDR: grpcAddresses.calendar,
      AGENTS_ADDR: grpcAddresses.agents,
    },
  };
  const children = new Map<string, { proc: ChildProcess; output: string[] }>();
  const processes: { child: string; name: ServiceName; env: Record<string, string> }[] = [];
  for (const name of SERVICES) {
    processes.push({ child: name, name, env: envs[name] });
    if (name === 'gateway') continue;
    for (let i = 2; i <= (opts.extraReplicas?.[name] ?? 0) + 1; i++)
      processes.push({ child: `${name}#${i}`, name, env: { ...envs[name], GRPC_PORT: String(await freePort()) } });
  }
  for (const { child, name, env } of processes) {
    const proc = spawn(process.execPath, [`services/${name}/dist/main.js`], {
      cwd: opts.root ?? ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        LOG_LEVEL: 'warn',
        // Profiling the deployment shape (docs/benchmarks.md): e.g. PROFILE_NODE_OPTIONS='--cpu-prof --cpu-prof-dir=/tmp/prof'.
        ...(process.env.PROFILE_NODE_OPTIONS ? { NODE_OPTIONS: process.env.PROFILE_NODE_OPTIONS } : {}),
        // Topics and consumer groups of this cluster only: clusters of tests running side by side share the broker.
        ...(opts.kafkaBrokers ? { KAFKA_BROKERS: opts.kafkaBrokers, KAFKA_NAMESPACE: `${opts.databasePrefix}.` } : {}),
        ...env,
        ...opts.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    proc.stdout.on('data', (d: Buffer) => output.push(d.toString()));
    proc.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    children.set(child, { proc, output });
  }
  const url = `http://127.0.0.1:${ports.gateway}`;
  const kill = () => {
    for (const { proc } of children.values()) if (proc.exitCode === null) proc.kill('SIGKILL');
  };
  const output = () => [...children].map(([n, c]) => `${n}:\n${c.output.join('')}`).join('\n');
  // Ready = the gateway is ready and every service's gRPC readiness ('') is SERVING (the gateway's
  // readiness is about the gateway alone).
  const ready = async (timeoutMs = 60_000) => {
    for (const end = Date.now() + timeoutMs; ;) {
      const serving = await Promise.all(Object.values(grpcAddresses).map((address) => healthStatus(address, '')));
      if (
        serving.every((s) => s === 'SERVING') &&
        (await fetch(`${url}/readyz`).then(
          (r) => r.ok,
          () => false,
        ))
      )
        return;
      const dead = [...children].find(([, c]) => c.proc.exitCode !== null);
      if (dead) throw new Error(`${dead[0]} exited during start-up:\n${dead[1].output.join('')}`);
      if (Date.now() > end) throw new Error(`the services were not ready within ${timeoutMs} ms:\n${output()}`);
      await sleep(100);
    }
  };
  if (!opts.noWait) await ready().catch((err: unknown) => (kill(), Promise.reject(err)));
  return {
    url,
    ports,
    children,
    grpcAddresses,
    ready,
    output,
    async stop() {
      const codes: Record<string, number | null> = {};
      for (const name of [...children.keys()].reverse()) {
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
