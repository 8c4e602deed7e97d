/**
 * The product under faults, for the fault-injection test (e2e/faults.test.ts) and the soak script
 * (scripts/soak.mjs). A cluster as Kubernetes runs it, on loopback: every service its own process,
 * replicas behind one name (processes.ts, DNS discovery), two gateways behind a load balancer (the
 * client's list of live gateways), a PostgreSQL server and a Kafka broker of its own (stopped and
 * started here), webhook receivers that sometimes fail or hang. A workload of keyed writes from
 * several tenants retries as a careful client does: the same Idempotency-Key after a 5xx, a lost
 * connection or a 409 IDEMPOTENCY_KEY_IN_USE. Faults: kill -9 a process, stop PostgreSQL, stop the
 * broker, roll a service (surge, out of the name, a preStop wait, SIGTERM). Then the invariants,
 * read from the databases and the receivers: acknowledged writes exist once, audit entries exactly
 * once, webhooks at least once, outboxes and queues drained (docs/operations.md, "Faults").
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Keyring, generateToken } from '@workauto/crypto';
import { databaseUrlFor } from '@workauto/db';
import { freePort, startEmbeddedPostgres, startPrivateKafka, type EmbeddedPostgresHandle } from '@workauto/testing';
import { startReceiver, type Receiver } from '@workauto/webhooks/testing';
import { startServiceProcesses, type ServiceName, type ServiceProcesses } from './processes.js';

/** Services with two processes in the fault cluster (the shape); the others run one. */
export const REPLICATED: ServiceName[] = ['identity', 'notes-tasks', 'crm-pipelines', 'webhooks'];
/** What the workload writes, each in another service: notes-tasks and crm-pipelines (two replicas), calendar (one). */
const KINDS = ['note', 'contact', 'event'] as const;
type Kind = (typeof KINDS)[number];
/** Each kind's table and text column in its service's database, and its audit action. */
const TABLES: Record<Kind, { database: string; table: string; column: string; action: string }> = {
  note: { database: 'notes_tasks', table: 'notes', column: 'title', action: 'note.created' },
  contact: { database: 'crm_pipelines', table: 'contacts', column: 'name', action: 'contact.created' },
  event: { database: 'calendar', table: 'events', column: 'title', action: 'calendar_event.created' },
};
/** Databases with an outbox (every service's) and the webhooks' delivery queue. */
const DATABASES = ['identity', 'notes_tasks', 'crm_pipelines', 'webhooks', 'apps', 'calendar', 'agents'];

export interface Tenant {
  id: string;
  key: string;
  calendarId: string;
  /** Its webhook endpoint's receiver: 10 % of deliveries answer 503, 2 % hang past the timeout. */
  receiver: Receiver;
}

export interface ProcessExit {
  child: string;
  code: number | null;
  /** SIGTERM to exit. */
  drainMs: number;
}

export interface FaultCluster {
  processes: ServiceProcesses;
  tenants: Tenant[];
  /** The gateways a client may use now: the load balancer's endpoints. */
  gateways: string[];
  /** Every SIGTERM'd process's exit. */
  exits: ProcessExit[];
  /** Every process started after the cluster (replacements, rollouts): spawn to ready, ms. */
  starts: { child: string; service: ServiceName; ms: number }[];
  databaseUrl(database: string): string;
  /** PostgreSQL stops (a fast shutdown: connections end) for `ms`, then starts again on the same port and data. */
  postgresOutage(ms: number): Promise<void>;
  /**
   * The broker is away for `ms`: `kill` stops its process (connections refused; its data and port
   * kept) and starts it again, `freeze` stops it where it is (SIGSTOP: requests hang) and lets it
   * go on — the same outage for the services, without a JVM start to wait for.
   */
  brokerOutage(ms: number, how: 'kill' | 'freeze'): Promise<void>;
  /** kill -9 of one process; a gateway's address leaves the load balancer, a service's process its name. */
  kill(child: string): Promise<void>;
  /** A new process of a service (or gateway), ready and in its name (or the load balancer). */
  add(service: ServiceName): Promise<string>;
  /**
   * A rolling restart of a service: for each of its processes, a new one starts (surge) and joins
   * the name once ready, the old one leaves it, keeps serving through `preStopMs` (the chart's
   * preStop sleep), then gets SIGTERM and drains.
   */
  roll(service: ServiceName, preStopMs: number): Promise<void>;
  /** A restart without a surge process (a pod deleted, a node drained): SIGTERM, then a new process once it exited. */
  restart(child: string): Promise<void>;
  /** The live processes of a service. */
  live(service: ServiceName): string[];
  /** Processes that ended without being told to (a crash), with their last output. */
  crashed(): string[];
  output(): string;
  close(): Promise<void>;
}

export async function startFaultCluster(
  opts: { tenants?: number; log?: (line: string) => void } = {},
): Promise<FaultCluster> {
  const log = opts.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'workauto-faults-pg-'));
  const port = await freePort();
  let postgres: EmbeddedPostgresHandle | undefined = await startEmbeddedPostgres({ dir, port, persistent: true });
  const serverUrl = postgres.url;
  const kafka = await startPrivateKafka();
  const prefix = `faults_${randomBytes(4).toString('hex')}`;
  const adminToken = generateToken('wkadmin_', 40);
  log(`PostgreSQL on ${port}, Kafka at ${kafka.brokers}; starting the processes`);
  const abandon = async (err: unknown): Promise<never> => {
    await Promise.allSettled([kafka.stop(), postgres?.stop()]);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  };
  const processes = await startServiceProcesses({
    databaseServerUrl: serverUrl,
    databasePrefix: prefix,
    platformAdminToken: adminToken,
    encryptionKeys: Keyring.generateSpec(),
    kafkaBrokers: kafka.brokers,
    discovery: 'dns',
    gateways: 2,
    extraReplicas: Object.fromEntries(REPLICATED.map((s) => [s, 1])),
    // kafkajs's own errors (a consumer's crash, a rebalance that failed) in the processes' output.
    env: { KAFKAJS_LOG_LEVEL: 'error' },
    serviceEnv: {
      // Deliveries retried within seconds (the product's schedule waits minutes), a hung receiver cut at 2 s.
      webhooks: { WEBHOOK_RETRY_SCHEDULE: '0s,1s,2s,3s,5s,5s,5s,5s,5s,5s', WEBHOOK_TIMEOUT_MS: '2000' },
    },
  }).catch(abandon);
  const told = new Set<string>();
  const exits: ProcessExit[] = [];
  const starts: FaultCluster['starts'] = [];
  const gateways = [...processes.urls];
  const gatewayOf = (child: string) => `http://${processes.children.get(child)!.address}`;
  const childrenOf = (service: ServiceName) =>
    [...processes.children].filter(([, c]) => c.service === service && running(c.proc)).map(([n]) => n);

  const tenants: Tenant[] = [];
  for (let i = 0; i < (opts.tenants ?? 4); i++) {
    const created = await api(gateways[0]!, 'POST', '/admin/tenants', adminToken, {
      name: `Faults ${i}`,
      owner: { name: 'Owner', email: `owner${i}@faults.test` },
    });
    if (created.status !== 201) throw new Error(`tenant bootstrap: ${created.status} ${JSON.stringify(created.body)}`);
    const key = created.body.api_key as string;
    const calendar = await api(gateways[0]!, 'POST', '/calendars', key, { name: 'Faults' });
    const receiver = await startReceiver((_req, n) =>
      n % 50 === 7 ? { status: 200, hang: true } : n % 10 === 3 ? { status: 503 } : { status: 200 },
    );
    const endpoint = await api(gateways[0]!, 'POST', '/webhook-endpoints', key, {
      url: receiver.url,
      event_types: ['note.created', 'contact.created', 'calendar_event.created'],
    });
    if (calendar.status !== 201 || endpoint.status !== 201)
      throw new Error(`tenant set-up: ${calendar.status} ${endpoint.status} ${JSON.stringify(endpoint.body)}`);
    tenants.push({
      id: (created.body.tenant as { id: string }).id,
      key,
      calendarId: calendar.body.id as string,
      receiver,
    });
  }

  const startProcess = async (service: ServiceName) => {
    const began = performance.now();
    const child = await processes.startProcess(service);
    starts.push({ child, service, ms: Math.round(performance.now() - began) });
    return child;
  };
  const terminate = async (child: string) => {
    const { proc } = processes.children.get(child)!;
    told.add(child);
    const began = performance.now();
    const exited = once(proc, 'exit');
    proc.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    exits.push({ child, code, drainMs: Math.round(performance.now() - began) });
  };

  const cluster: FaultCluster = {
    processes,
    tenants,
    gateways,
    exits,
    starts,
    databaseUrl: (database) => databaseUrlFor(serverUrl, `${prefix}_${database}`),
    async postgresOutage(ms) {
      await postgres?.stop();
      postgres = undefined;
      await sleep(ms);
      postgres = await startEmbeddedPostgres({ dir, port, persistent: true });
    },
    async brokerOutage(ms, how) {
      if (how === 'freeze') {
        kafka.freeze(true);
        await sleep(ms);
        kafka.freeze(false);
        return;
      }
      await kafka.halt();
      await sleep(ms);
      await kafka.resume();
    },
    async kill(child) {
      const c = processes.children.get(child)!;
      told.add(child);
      if (c.service === 'gateway') gateways.splice(gateways.indexOf(gatewayOf(child)), 1);
      const exited = once(c.proc, 'exit');
      c.proc.kill('SIGKILL');
      await exited;
      processes.unpublish(child);
    },
    async add(service) {
      const child = await startProcess(service);
      if (service === 'gateway') gateways.push(gatewayOf(child));
      else processes.publish(child);
      return child;
    },
    async roll(service, preStopMs) {
      // As a Deployment with maxSurge 1 and maxUnavailable 0 does: the next new process starts as
      // soon as the previous old one is terminating (out of the name, in its preStop sleep).
      const terminating: Promise<void>[] = [];
      for (const old of childrenOf(service)) {
        await cluster.add(service);
        if (service === 'gateway') gateways.splice(gateways.indexOf(gatewayOf(old)), 1);
        else processes.unpublish(old);
        terminating.push(sleep(preStopMs).then(() => terminate(old)));
      }
      await Promise.all(terminating);
    },
    async restart(child) {
      const { service } = processes.children.get(child)!;
      processes.unpublish(child);
      await terminate(child);
      await cluster.add(service);
    },
    live: childrenOf,
    crashed: () =>
      [...processes.children]
        .filter(([name, c]) => !told.has(name) && !running(c.proc))
        .map(
          ([name, c]) => `${name} (exit ${c.proc.exitCode ?? c.proc.signalCode}): ${c.output.join('').slice(-2_000)}`,
        ),
    output: () => processes.output(),
    async close() {
      for (const { proc } of processes.children.values()) if (running(proc)) proc.kill('SIGKILL');
      // Each step on its own: one that fails must not leave the broker or the database running.
      const failed = (
        await Promise.allSettled([...tenants.map((t) => t.receiver.close()), kafka.stop(), postgres?.stop()])
      ).filter((r) => r.status === 'rejected');
      rmSync(dir, { recursive: true, force: true });
      if (failed.length) log(`closing the cluster: ${failed.map((r) => String(r.reason)).join('; ')}`);
    },
  };
  return cluster;
}

const running = (proc: { exitCode: number | null; signalCode: string | null }) =>
  proc.exitCode === null && proc.signalCode === null;

/** One HTTP call of the API; `status` 0 when the connection failed. */
async function api(
  gateway: string,
  method: string,
  path: string,
  key: string,
  body?: unknown,
  headers: Record<string, string> = {},
  timeoutMs = 15_000,
): Promise<{ status: number; replayed: boolean; body: Record<string, unknown>; retryAfterMs?: number }> {
  try {
    const res = await fetch(`${gateway}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const retryAfter = Number(res.headers.get('retry-after'));
    return {
      status: res.status,
      replayed: res.headers.get('idempotent-replayed') === 'true',
      body: ((await res.json().catch(() => ({}))) ?? {}) as Record<string, unknown>,
      ...(retryAfter > 0 ? { retryAfterMs: retryAfter * 1000 } : {}),
    };
  } catch {
    return { status: 0, replayed: false, body: {} };
  }
}

export interface WriteRecord {
  tenant: number;
  kind: Kind;
  key: string;
  title: string;
  /** The resource's id once acknowledged (2xx). */
  id?: string;
  /** Its acknowledgement was a replay of an earlier attempt's outcome. */
  replayed?: boolean;
  /** A 4xx other than "in use": a definite refusal (never expected here). */
  refused?: number;
  /** No definite answer within the give-up time. */
  gaveUp?: boolean;
  attempts: number;
  /** First attempt to acknowledgement (or to giving up), ms. */
  ms: number;
}

export interface AttemptRecord {
  at: number;
  phase: string;
  /** HTTP status, 0 for a connection that failed or timed out. */
  status: number;
  reason?: string;
}

/**
 * Keyed writes from every tenant, `writers` loops each, through a live gateway chosen in turn; every
 * attempt is recorded with the phase the test was in. A write is retried with its key until a
 * definite answer (2xx or a 4xx other than IDEMPOTENCY_KEY_IN_USE) or `giveUpMs`.
 */
export class Workload {
  readonly writes: WriteRecord[] = [];
  readonly attempts: AttemptRecord[] = [];
  /** What the test is doing now (recorded with each attempt). */
  phase = 'steady';
  private running = false;
  private loops: Promise<void>[] = [];
  private next = 0;

  constructor(
    private readonly cluster: FaultCluster,
    private readonly opts: { writers: number; pauseMs: number; giveUpMs: number } = {
      writers: 2,
      pauseMs: 50,
      giveUpMs: 90_000,
    },
  ) {}

  start(): void {
    this.running = true;
    this.cluster.tenants.forEach((_t, tenant) => {
      for (let w = 0; w < this.opts.writers; w++) this.loops.push(this.loop(tenant, w));
    });
  }

  /** Stops starting writes; resolves once those in flight have their answer. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async loop(tenant: number, writer: number): Promise<void> {
    for (let n = writer; this.running; n++) {
      await this.write(tenant, KINDS[n % KINDS.length]!);
      await sleep(this.opts.pauseMs);
    }
  }

  private async write(tenant: number, kind: Kind): Promise<void> {
    const t = this.cluster.tenants[tenant]!;
    const key = randomUUID();
    const title = `${kind} ${key}`;
    const [path, body] =
      kind === 'note'
        ? ['/notes', { title }]
        : kind === 'contact'
          ? ['/contacts', { name: title }]
          : [
              '/events',
              { calendar_id: t.calendarId, title, start_at: '2031-03-03T09:00:00Z', end_at: '2031-03-03T09:30:00Z' },
            ];
    const record: WriteRecord = { tenant, kind, key, title, attempts: 0, ms: 0 };
    const began = performance.now();
    for (;;) {
      const gateways = this.cluster.gateways;
      const gateway = gateways[this.next++ % Math.max(1, gateways.length)];
      if (!gateway) {
        await sleep(200);
        continue;
      }
      record.attempts++;
      const res = await api(gateway, 'POST', path, t.key, body, { 'idempotency-key': key });
      const info = (
        res.body.error as
          { details?: { reason?: string; metadata?: { service?: string; cause?: string } }[] } | undefined
      )?.details?.[0];
      // A 503 names the service it is about, and why it was not called (e.g. `SERVICE_UNAVAILABLE/service_down calendar`).
      const why = info?.reason && info.metadata?.cause ? `${info.reason}/${info.metadata.cause}` : info?.reason;
      const reason = why && info?.metadata?.service ? `${why} ${info.metadata.service}` : why;
      this.attempts.push({
        at: performance.now(),
        phase: this.phase,
        status: res.status,
        ...(reason ? { reason } : {}),
      });
      if (res.status >= 200 && res.status < 300) {
        record.id = res.body.id as string;
        record.replayed = res.replayed;
        break;
      }
      if (res.status >= 400 && res.status < 500 && info?.reason !== 'IDEMPOTENCY_KEY_IN_USE' && res.status !== 429) {
        record.refused = res.status;
        break;
      }
      if (performance.now() - began > this.opts.giveUpMs) {
        record.gaveUp = true;
        break;
      }
      await sleep(Math.min(res.retryAfterMs ?? 250, 2_000));
    }
    record.ms = Math.round(performance.now() - began);
    this.writes.push(record);
  }

  /** The 5xx of each phase by their reason (e.g. `PostgreSQL stopped 6 s: DATABASE_UNAVAILABLE`). */
  serverErrorReasons(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const a of this.attempts)
      if (a.status >= 500)
        out[`${a.phase}: ${a.status} ${a.reason ?? ''}`.trim()] =
          (out[`${a.phase}: ${a.status} ${a.reason ?? ''}`.trim()] ?? 0) + 1;
    return out;
  }

  /** Per phase: attempts, 5xx, failed connections, 409 in use (in the order phases began). */
  byPhase(): {
    phase: string;
    attempts: number;
    ok: number;
    serverErrors: number;
    connectionErrors: number;
    inUse: number;
  }[] {
    const phases = new Map<
      string,
      { attempts: number; ok: number; serverErrors: number; connectionErrors: number; inUse: number }
    >();
    for (const a of this.attempts) {
      const p = phases.get(a.phase) ?? { attempts: 0, ok: 0, serverErrors: 0, connectionErrors: 0, inUse: 0 };
      p.attempts++;
      if (a.status >= 200 && a.status < 300) p.ok++;
      if (a.status >= 500) p.serverErrors++;
      if (a.status === 0) p.connectionErrors++;
      if (a.reason?.startsWith('IDEMPOTENCY_KEY_IN_USE')) p.inUse++;
      phases.set(a.phase, p);
    }
    return [...phases].map(([phase, p]) => ({ phase, ...p }));
  }
}

export interface Invariants {
  acknowledged: number;
  /** Acknowledged writes whose resource is missing. */
  missing: string[];
  /** Keys with more than one resource (a write applied twice). */
  duplicates: string[];
  /** Resources whose creation is not in the audit log exactly once: id → entries. */
  auditNotOnce: Record<string, number>;
  auditEntries: number;
  /** Resources no webhook delivery reached. */
  undelivered: string[];
  /** Of those, what the webhooks service knows: no event taken in, or its delivery's status. */
  undeliveredWhy: Record<string, number>;
  deliveries: number;
  /** Outbox rows not published, webhook jobs not finished, dead webhook jobs, after the drain wait. */
  pendingOutbox: number;
  pendingJobs: number;
  /** The unfinished deliveries, if any: state, attempts, seconds to the next attempt, last error. */
  pendingJobDetails: string[];
  deadJobs: number;
  /** How long the outboxes, the audit log and the deliveries took to catch up after the workload stopped. */
  drainMs: number;
}

/** Waits (up to `timeoutMs`) for everything to drain, then reads the invariants. */
export async function checkInvariants(
  cluster: FaultCluster,
  workload: Workload,
  timeoutMs = 90_000,
): Promise<Invariants> {
  const clients = new Map<string, pg.Client>();
  const db = async (database: string) => {
    let c = clients.get(database);
    if (!c) {
      c = new pg.Client({ connectionString: cluster.databaseUrl(database) });
      await c.connect();
      clients.set(database, c);
    }
    return c;
  };
  try {
    const began = performance.now();
    const tenantIds = cluster.tenants.map((t) => t.id);
    const resources = async () => {
      const all: { kind: Kind; id: string; text: string; tenant: string }[] = [];
      for (const kind of KINDS) {
        const { database, table, column } = TABLES[kind];
        const { rows } = await (
          await db(database)
        ).query<{ id: string; text: string; tenant_id: string }>(
          `SELECT id::text, ${column} AS text, tenant_id::text FROM ${table} WHERE tenant_id = ANY($1::uuid[]) AND ${column} LIKE $2`,
          [tenantIds, `${kind} %`],
        );
        all.push(...rows.map((r) => ({ kind, id: r.id, text: r.text, tenant: r.tenant_id })));
      }
      return all;
    };
    const pending = async () => {
      let outbox = 0;
      for (const database of DATABASES)
        outbox += Number(
          (
            await (
              await db(database)
            ).query<{ n: string }>('SELECT count(*) AS n FROM outbox WHERE published_at IS NULL')
          ).rows[0]!.n,
        );
      // The delivery queue only: periodic workers keep a row of their own in the same table.
      const jobs = (
        await (
          await db('webhooks')
        ).query<{ state: string; n: number }>(
          `SELECT state, count(*)::int AS n FROM jobs WHERE queue = 'webhook-deliveries' GROUP BY state`,
        )
      ).rows;
      const count = (state: string) => jobs.find((j) => j.state === state)?.n ?? 0;
      return { outbox, jobs: count('queued') + count('running'), dead: count('dead') };
    };
    const audit = async (ids: string[]) =>
      (
        await (
          await db('identity')
        ).query<{ resource_id: string; n: number }>(
          `SELECT resource_id, count(*)::int AS n FROM audit_log
            WHERE tenant_id = ANY($1::uuid[]) AND action = ANY($2) AND resource_id = ANY($3) GROUP BY resource_id`,
          [tenantIds, KINDS.map((k) => TABLES[k].action), ids],
        )
      ).rows;
    const delivered = () => {
      const ids = new Set<string>();
      let deliveries = 0;
      for (const t of cluster.tenants)
        for (const r of t.receiver.received) {
          deliveries++;
          try {
            ids.add((JSON.parse(r.body) as { data: { id: string } }).data.id);
          } catch {
            // not a delivery body
          }
        }
      return { ids, deliveries };
    };

    let found = await resources();
    let state = await pending();
    let audited = await audit(found.map((r) => r.id));
    for (const end = performance.now() + timeoutMs; performance.now() < end;) {
      found = await resources();
      state = await pending();
      audited = await audit(found.map((r) => r.id));
      const { ids } = delivered();
      if (!state.outbox && !state.jobs && audited.length === found.length && found.every((r) => ids.has(r.id))) break;
      await sleep(500);
    }
    const drainMs = Math.round(performance.now() - began);
    const byTitle = new Map<string, number>();
    for (const r of found) byTitle.set(r.text, (byTitle.get(r.text) ?? 0) + 1);
    const existing = new Set(found.map((r) => r.id));
    const acked = workload.writes.filter((w) => w.id);
    const auditCount = new Map(audited.map((a) => [a.resource_id, a.n]));
    const { ids, deliveries } = delivered();
    const missed = found.filter((r) => !ids.has(r.id));
    const undeliveredWhy: Record<string, number> = {};
    if (missed.length) {
      const { rows } = await (
        await db('webhooks')
      ).query<{ id: string; status: string | null }>(
        `SELECT r.id, coalesce(d.status, CASE WHEN e.id IS NULL THEN 'no webhook event' ELSE 'no delivery' END) AS status
           FROM unnest($1::text[]) AS r(id)
           LEFT JOIN webhook_events e ON e.payload::jsonb -> 'data' ->> 'id' = r.id
           LEFT JOIN webhook_deliveries d ON d.event_id = e.id`,
        [missed.map((r) => r.id)],
      );
      for (const r of rows) undeliveredWhy[r.status ?? '?'] = (undeliveredWhy[r.status ?? '?'] ?? 0) + 1;
    }
    const pendingJobDetails = state.jobs
      ? (
          await (
            await db('webhooks')
          ).query<{ line: string }>(
            `SELECT concat_ws(' ', state, attempts || ' attempts', 'next in ' || round(extract(epoch FROM next_attempt_at - now())) || ' s',
                              'lease ' || lease_owner, last_error) AS line
               FROM jobs WHERE queue = 'webhook-deliveries' AND state IN ('queued', 'running') LIMIT 5`,
          )
        ).rows.map((r) => r.line)
      : [];
    return {
      acknowledged: acked.length,
      missing: acked.filter((w) => !existing.has(w.id!)).map((w) => `${w.title} ${w.id}`),
      duplicates: [...byTitle].filter(([, n]) => n > 1).map(([title, n]) => `${title} × ${n}`),
      auditNotOnce: Object.fromEntries(
        found.filter((r) => auditCount.get(r.id) !== 1).map((r) => [r.id, auditCount.get(r.id) ?? 0]),
      ),
      auditEntries: [...auditCount.values()].reduce((a, b) => a + b, 0),
      undelivered: missed.map((r) => `${r.kind} ${r.id}`),
      undeliveredWhy,
      deliveries,
      pendingOutbox: state.outbox,
      pendingJobs: state.jobs,
      pendingJobDetails,
      deadJobs: state.dead,
      drainMs,
    };
  } finally {
    for (const c of clients.values()) await c.end().catch(() => undefined);
  }
}

/** Resident set size (MB) of each process of the cluster (Linux /proc), by child name. */
export async function residentMemory(cluster: FaultCluster): Promise<Record<string, number>> {
  const { readFile } = await import('node:fs/promises');
  const out: Record<string, number> = {};
  for (const [name, c] of cluster.processes.children) {
    if (!running(c.proc) || !c.proc.pid) continue;
    const status = await readFile(`/proc/${c.proc.pid}/status`, 'utf8').catch(() => '');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
    if (Number.isFinite(kb)) out[name] = Math.round(kb / 1024);
  }
  return out;
}
