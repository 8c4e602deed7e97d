/**
 * How a Downstream finds a service's replicas (docs/decisions.md, "Finding replicas"): its name is
 * resolved through DNS (a Kubernetes headless Service answers with every ready pod) when the channel
 * starts, again every few seconds, and at once when a connection ends (a pod's GOAWAY as it drains).
 * grpc-js's own `dns:` resolver asks only when a connection ends, and at most every 30 s: a rollout
 * replaced both replicas of a service before the gateway learnt the new ones.
 *
 * The addresses the channel balances over (round_robin) are the resolved ones minus those the
 * Downstream's health checks left out (`exclude`); when every address is left out, all are offered,
 * so a wrong verdict never leaves the channel with nothing to try.
 */
import dns from 'node:dns';
import { isIP } from 'node:net';
import * as grpc from '@grpc/grpc-js';

/** The target scheme of this resolver: `workauto-dns:///host:port`. */
export const DISCOVERY_SCHEME = 'workauto-dns';
/** Channel option naming the Discovery a channel reports to (one per Downstream). */
const DISCOVERY_OPTION = 'workauto.discovery_id';
/** Channel option: how often the name is resolved again while the channel is in use (ms). */
export const REFRESH_OPTION = 'workauto.dns_refresh_ms';
const DEFAULT_REFRESH_MS = 2_000;
/** Two on-demand lookups are at least this far apart (connections ending in a burst ask together). */
const MIN_LOOKUP_GAP_MS = 250;

/** A service's addresses as the Downstream sees them: what DNS said, and which are left out. */
export class Discovery {
  private static next = 0;
  private static readonly all = new Map<string, Discovery>();
  readonly id = `discovery-${++Discovery.next}`;
  /** host:port of every address the name resolved to last. */
  addresses: string[] = [];
  private readonly excluded = new Set<string>();
  private readonly resolvers = new Set<RefreshingDnsResolver>();

  constructor() {
    Discovery.all.set(this.id, this);
  }

  static of(options: grpc.ChannelOptions): Discovery | undefined {
    return Discovery.all.get(String(options[DISCOVERY_OPTION]));
  }

  /** The channel options that tie a channel's resolver to this Discovery. */
  get channelOptions(): grpc.ChannelOptions {
    return { [DISCOVERY_OPTION]: this.id };
  }

  /** Leaves an address out of the channel's picks (its health check fails). */
  exclude(address: string): void {
    if (this.excluded.has(address)) return;
    this.excluded.add(address);
    this.publish();
  }

  /** Offers an address again (its health check answers SERVING). */
  include(address: string): void {
    if (!this.excluded.delete(address)) return;
    this.publish();
  }

  /** Looks the name up now (a service marked down may be back at another address). */
  async refresh(): Promise<void> {
    await Promise.all([...this.resolvers].map((r) => r.lookup()));
  }

  /** The addresses the channels balance over. */
  offered(): string[] {
    const healthy = this.addresses.filter((a) => !this.excluded.has(a));
    return healthy.length ? healthy : this.addresses;
  }

  resolved(addresses: string[]): void {
    this.addresses = addresses;
    // An address DNS no longer lists is forgotten, verdict and all.
    for (const a of this.excluded) if (!addresses.includes(a)) this.excluded.delete(a);
  }

  attach(resolver: RefreshingDnsResolver): void {
    this.resolvers.add(resolver);
  }

  detach(resolver: RefreshingDnsResolver): void {
    this.resolvers.delete(resolver);
  }

  close(): void {
    Discovery.all.delete(this.id);
  }

  private publish(): void {
    for (const r of this.resolvers) r.publish();
  }
}

/** grpc-js's resolver interface (grpc.experimental.Resolver) for `workauto-dns:` targets. */
class RefreshingDnsResolver implements grpc.experimental.Resolver {
  private readonly host: string;
  private readonly port: number;
  private readonly refreshMs: number;
  private readonly discovery: Discovery;
  private timer: NodeJS.Timeout | undefined;
  private pending = false;
  /** The channel asked (updateResolution): the next result is handed over even when unchanged. */
  private asked = false;
  private lastLookup = 0;
  private destroyed = false;

  constructor(
    target: grpc.experimental.GrpcUri,
    private readonly listener: grpc.experimental.ResolverListener,
    options: grpc.ChannelOptions,
  ) {
    const hostPort = grpc.experimental.splitHostPort(target.path);
    this.host = hostPort?.host ?? target.path;
    this.port = hostPort?.port ?? 443;
    this.refreshMs = Number(options[REFRESH_OPTION] ?? DEFAULT_REFRESH_MS);
    // A channel made without a Downstream (a plain client given this scheme) gets one of its own.
    this.discovery = Discovery.of(options) ?? new Discovery();
    this.discovery.attach(this);
  }

  static getDefaultAuthority(target: grpc.experimental.GrpcUri): string {
    return target.path;
  }

  updateResolution(): void {
    this.destroyed = false;
    this.asked = true;
    this.discovery.attach(this);
    // An IP address never changes: resolved once, not polled.
    if (!this.timer && !isIP(this.host)) {
      this.timer = setInterval(() => void this.lookup(), this.refreshMs);
      this.timer.unref();
    }
    if (Date.now() - this.lastLookup >= MIN_LOOKUP_GAP_MS || !this.discovery.addresses.length) void this.lookup();
    else setTimeout(() => void this.lookup(), MIN_LOOKUP_GAP_MS).unref();
  }

  destroy(): void {
    this.destroyed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    this.discovery.detach(this);
  }

  /** Hands the channel the offered addresses (never synchronously with a call from grpc-js). */
  publish(): void {
    setImmediate(() => {
      if (this.destroyed || !this.discovery.addresses.length) return;
      const endpoints = this.discovery.offered().map((address) => {
        const { host, port } = grpc.experimental.splitHostPort(address)!;
        return { addresses: [{ host, port: port! }] };
      });
      this.listener(grpc.experimental.statusOrFromValue(endpoints), {}, null, '');
    });
  }

  lookup(): Promise<void> {
    if (this.pending || this.destroyed) return Promise.resolve();
    this.pending = true;
    this.lastLookup = Date.now();
    return dns.promises.lookup(this.host, { all: true }).then(
      (found) => {
        this.pending = false;
        const addresses = found.map((a) => (a.family === 6 ? `[${a.address}]` : a.address) + `:${this.port}`);
        const before = this.discovery.addresses.join();
        this.discovery.resolved(addresses);
        if (before !== addresses.join() || this.asked) this.publish();
        this.asked = false;
      },
      (err: Error) => {
        this.pending = false;
        if (this.destroyed) return;
        // A name that resolved before keeps its last addresses through a DNS hiccup (or a moment
        // with no ready pod); one that never resolved fails the channel's calls, saying why.
        if (this.discovery.addresses.length) return;
        setImmediate(() =>
          this.listener(
            grpc.experimental.statusOrFromError({
              code: grpc.status.UNAVAILABLE,
              details: `cannot resolve ${this.host}: ${err.message}`,
              metadata: new grpc.Metadata(),
            }),
            {},
            null,
            '',
          ),
        );
      },
    );
  }
}

grpc.experimental.registerResolver(DISCOVERY_SCHEME, RefreshingDnsResolver);
