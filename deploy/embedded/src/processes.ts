/**
 * The product as a cluster runs it: each service's own main.js in its own process, configured only
 * by environment variables (as the Helm chart sets them). For the deployment-shape tests, the fault
 * test and the benchmarks; make dev runs everything in one process instead (startStack).
 *
 * With `discovery: 'dns'` the processes find each other as a cluster's do: each service has one
 * name (`<service>.workauto.test`) and one port, every replica listens on that port at its own
 * loopback address (127.0.0.1, 127.0.0.2, …), and the name resolves to the replicas published in a
 * names file, which the test edits as endpoints change (test-dns.ts: a headless Service's DNS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ensureDatabase } from '@workauto/db';
import { generateCallerKeys, mergeVerifyKeys } from '@workauto/grpc';
import { freePort, healthStatus } from '@workauto/testing';

/**
 * How long a start may take before the harness gives up on it: a process starts in 1–2 s on a quiet
 * machine, but 13 of them at once beside a second suite (load average 30–50 on 2 cores) took over
 * 60 s. Below the suite's 180 s per test, so a start that truly hangs still fails with the output.
 */
const READY_TIMEOUT_MS = 150_000;

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const TEST_DNS = fileURLToPath(new URL('./test-dns.js', import.meta.url));
/** Start order; stopped in reverse (the gateways first). */
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
type GrpcServiceName = Exclude<ServiceName, 'gateway'>;

/** One process of the cluster. */
export interface ClusterChild {
  proc: ChildProcess;
  /** What it printed (for failure messages). */
  output: string[];
  service: ServiceName;
  /** host:port it listens on (gRPC for services, HTTP for a gateway). */
  address: string;
}

export interface ServiceProcesses {
  /** http://127.0.0.1:<port> of the (first) gateway. */
  url: string;
  /** Every gateway's URL (`gateways` of them). */
  urls: string[];
  /** Each service's port (gRPC for services, HTTP for the first gateway). */
  ports: Record<ServiceName, number>;
  /** Each process by child name: the service's name for its first process, `<service>#<n>` for the others. */
  children: Map<string, ClusterChild>;
  /** What the gateway dials for each gRPC service: host:port, or `<service>.workauto.test:<port>` with DNS discovery. */
  grpcAddresses: Record<GrpcServiceName, string>;
  /** Resolves once every service reports readiness SERVING and the gateways answer; rejects if a process exits. */
  ready(timeoutMs?: number): Promise<void>;
  /** What every process printed, for assertion messages. */
  output(): string;
  /** SIGTERM each, gateways first; resolves to the exit codes by child. */
  stop(): Promise<Record<string, number | null>>;
  /**
   * One more process of a service (same database and env; with DNS discovery at the next loopback
   * address, else on a new port): resolves to its child name once it is ready (readiness SERVING, or
   * /readyz for a gateway). A service's new process is not in its name until publish().
   */
  startProcess(service: ServiceName): Promise<string>;
  /** Adds a process to its service's name (DNS discovery): what a ready pod's endpoint does. */
  publish(child: string): void;
  /** Takes a process out of its service's name: what a terminating pod's endpoint does. */
  unpublish(child: string): void;
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
  /** More processes of a service beside the first (same database and env, own address), e.g. {webhooks: 1}. */
  extraReplicas?: Partial<Record<GrpcServiceName, number>>;
  /** Gateway processes (default 1), each on its own port, sharing their database. */
  gateways?: number;
  /** 'dns': services are dialled by name, resolved from the names file (see above); default: 127.0.0.1:<port> of the first process. */
  discovery?: 'dns';
  /** Env of one service's processes over the rest (e.g. a gateway's deadline). */
  serviceEnv?: Partial<Record<ServiceName, Record<string, string>>>;
  /** The built checkout whose services/<name>/dist/main.js run (default this one; the upgrade test runs the previous release's). */
  root?: string;
}): Promise<ServiceProcesses> {
  const dnsNames = opts.discovery === 'dns';
  const db = async (service: ServiceName, database: string) =>
    opts.databaseUrls?.[service] ?? ensureDatabase(opts.databaseServerUrl, `${opts.databasePrefix}_${database}`);
  const ports = Object.fromEntries(await Promise.all(SERVICES.map(async (s) => [s, await freePort()]))) as Record<
    ServiceName,
    number
  >;
  const nameOf = (service: GrpcServiceName) => `${service}.workauto.test`;
  const grpcAddresses = Object.fromEntries(
    SERVICES.filter((s) => s !== 'gateway').map((s) => [
      s,
      dnsNames ? `${nameOf(s)}:${ports[s]}` : `127.0.0.1:${ports[s]}`,
    ]),
  ) as Record<GrpcServiceName, string>;
  const namesDir = dnsNames ? mkdtempSync(join(tmpdir(), 'workauto-names-')) : undefined;
  const namesFile = namesDir ? join(namesDir, 'names.json') : undefined;
  if (namesDir) process.once('exit', () => rmSync(namesDir, { recursive: true, force: true }));
  const published = new Map<string, Set<string>>();
  const writeNames = () => {
    if (!namesFile) return;
    const names = Object.fromEntries([...published].map(([name, hosts]) => [name, [...hosts]]));
    // Renamed into place: a process reading it never sees half a file.
    writeFileSync(`${namesFile}.tmp`, JSON.stringify(names));
    renameSync(`${namesFile}.tmp`, namesFile);
  };
  writeNames();

  const callerKeys = generateCallerKeys('gateway');
  // agents calls notes-tasks, crm-pipelines, calendar and apps as a run's agent with a key of its own.
  const agentsKeys = generateCallerKeys('agents');
  const verifyKeys = mergeVerifyKeys(callerKeys.verifyKeys, agentsKeys.verifyKeys);
  const grpc = { ENCRYPTION_KEYS: opts.encryptionKeys, CALLER_VERIFY_KEYS: verifyKeys };
  const envs: Record<ServiceName, Record<string, string>> = {
    identity: {
      ...grpc,
      DATABASE_URL: await db('identity', 'identity'),
      PLATFORM_ADMIN_TOKEN: opts.platformAdminToken,
    },
    'notes-tasks': { ...grpc, DATABASE_URL: await db('notes-tasks', 'notes_tasks') },
    'crm-pipelines': { ...grpc, DATABASE_URL: await db('crm-pipelines', 'crm_pipelines') },
    // Receivers in tests and benchmarks listen on loopback (the chart refuses private addresses).
    webhooks: { ...grpc, DATABASE_URL: await db('webhooks', 'webhooks'), EGRESS_ALLOW_PRIVATE: 'true' },
    // MCP servers of the tests run on loopback.
    apps: { ...grpc, DATABASE_URL: await db('apps', 'apps'), EGRESS_ALLOW_PRIVATE: 'true' },
    calendar: { ...grpc, DATABASE_URL: await db('calendar', 'calendar') },
    agents: {
      ...grpc,
      DATABASE_URL: await db('agents', 'agents'),
      CALLER_SIGNING_KEY: agentsKeys.signingKey,
      NOTES_TASKS_ADDR: grpcAddresses['notes-tasks'],
      CRM_PIPELINES_ADDR: grpcAddresses['crm-pipelines'],
      APPS_ADDR: grpcAddresses.apps,
      CALENDAR_ADDR: grpcAddresses.calendar,
    },
    gateway: {
      ENCRYPTION_KEYS: opts.encryptionKeys,
      DATABASE_URL: await db('gateway', 'gateway'),
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

  const children = new Map<string, ClusterChild>();
  const counts = new Map<ServiceName, number>();
  /** The next process of a service: its child name, host and port. */
  const place = async (service: ServiceName) => {
    const n = (counts.get(service) ?? 0) + 1;
    counts.set(service, n);
    const child = n === 1 ? service : `${service}#${n}`;
    if (service === 'gateway') return { child, host: '127.0.0.1', port: n === 1 ? ports.gateway : await freePort() };
    if (dnsNames) return { child, host: `127.0.0.${n}`, port: ports[service] };
    return { child, host: '127.0.0.1', port: n === 1 ? ports[service] : await freePort() };
  };
  const launch = async (service: ServiceName): Promise<string> => {
    const { child, host, port } = await place(service);
    const nodeOptions = [
      // Profiling the deployment shape (docs/benchmarks.md): e.g. PROFILE_NODE_OPTIONS='--cpu-prof --cpu-prof-dir=/tmp/prof'.
      process.env.PROFILE_NODE_OPTIONS,
      namesFile ? `--import=${TEST_DNS}` : undefined,
    ].filter(Boolean);
    const listen =
      service === 'gateway' ? { HOST: host, PORT: String(port) } : { GRPC_HOST: host, GRPC_PORT: String(port) };
    const proc = spawn(process.execPath, [`services/${service}/dist/main.js`], {
      cwd: opts.root ?? ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        LOG_LEVEL: 'warn',
        ...(nodeOptions.length ? { NODE_OPTIONS: nodeOptions.join(' ') } : {}),
        ...(namesFile ? { WORKAUTO_TEST_NAMES: namesFile } : {}),
        // Topics and consumer groups of this cluster only: clusters of tests running side by side share the broker.
        ...(opts.kafkaBrokers ? { KAFKA_BROKERS: opts.kafkaBrokers, KAFKA_NAMESPACE: `${opts.databasePrefix}.` } : {}),
        ...envs[service],
        ...listen,
        ...opts.env,
        ...opts.serviceEnv?.[service],
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    proc.stdout.on('data', (d: Buffer) => output.push(d.toString()));
    proc.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    children.set(child, { proc, output, service, address: `${host}:${port}` });
    return child;
  };
  const publish = (child: string) => {
    const c = children.get(child);
    if (!c || c.service === 'gateway' || !dnsNames) return;
    const name = nameOf(c.service);
    if (!published.has(name)) published.set(name, new Set());
    published.get(name)!.add(c.address.split(':')[0]!);
    writeNames();
  };
  const unpublish = (child: string) => {
    const c = children.get(child);
    if (!c || c.service === 'gateway' || !dnsNames) return;
    published.get(nameOf(c.service))?.delete(c.address.split(':')[0]!);
    writeNames();
  };

  for (const service of SERVICES) {
    const copies = service === 'gateway' ? (opts.gateways ?? 1) : 1 + (opts.extraReplicas?.[service] ?? 0);
    for (let i = 0; i < copies; i++) publish(await launch(service));
  }
  const gatewayUrl = (child: string) => `http://${children.get(child)!.address}`;
  const urls = [...children.keys()].filter((c) => children.get(c)!.service === 'gateway').map(gatewayUrl);
  const running = (child: string) => {
    const { proc } = children.get(child)!;
    return proc.exitCode === null && proc.signalCode === null;
  };
  const kill = () => {
    for (const { proc } of children.values()) if (proc.exitCode === null) proc.kill('SIGKILL');
  };
  const output = () => [...children].map(([n, c]) => `${n}:\n${c.output.join('')}`).join('\n');
  /** Readiness of one process: gRPC readiness ('') SERVING, or a gateway's /readyz 200. */
  const isReady = async (child: string) => {
    const c = children.get(child)!;
    if (c.service !== 'gateway') return (await healthStatus(c.address, '')) === 'SERVING';
    return fetch(`${gatewayUrl(child)}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
  };
  /**
   * Why a child died: its code or signal, and its output up to `close` — 'exit' can come before
   * the last bytes of its stdout and stderr (a fatal line written just before process.exit).
   */
  const exitReport = async (child: string) => {
    const { proc, output } = children.get(child)!;
    const closed = proc.stdout?.readableEnded !== false && proc.stderr?.readableEnded !== false;
    if (!closed) await Promise.race([once(proc, 'close'), sleep(2_000)]);
    const how = proc.signalCode ? `signal ${proc.signalCode}` : `code ${proc.exitCode}`;
    return `${child} exited during start-up (${how}):\n${output.join('')}`;
  };
  const untilReady = async (names: string[], timeoutMs: number) => {
    for (const end = Date.now() + timeoutMs; ;) {
      const states = await Promise.all(names.map(isReady));
      if (states.every(Boolean)) return;
      const dead = names.find((n) => !running(n));
      if (dead) throw new Error(await exitReport(dead));
      if (Date.now() > end) throw new Error(`the services were not ready within ${timeoutMs} ms:\n${output()}`);
      await sleep(100);
    }
  };
  // Ready = every process is: each service's gRPC readiness and each gateway's (which is about the gateway alone).
  const ready = (timeoutMs = READY_TIMEOUT_MS) => untilReady([...children.keys()].filter(running), timeoutMs);
  if (!opts.noWait) await ready().catch((err: unknown) => (kill(), Promise.reject(err)));
  return {
    url: urls[0]!,
    urls,
    ports,
    children,
    grpcAddresses,
    ready,
    output,
    publish,
    unpublish,
    async startProcess(service) {
      const child = await launch(service);
      await untilReady([child], READY_TIMEOUT_MS);
      return child;
    },
    async stop() {
      const codes: Record<string, number | null> = {};
      const order = [...children.keys()].sort(
        (a, b) =>
          SERVICES.indexOf(children.get(b)!.service) - SERVICES.indexOf(children.get(a)!.service) || (a < b ? 1 : -1),
      );
      for (const name of order) {
        const { proc } = children.get(name)!;
        if (!running(name)) {
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
