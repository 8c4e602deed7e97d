/**
 * A tenant's share of a service's database connections. Calls run in their tenant's scope
 * (runForTenant, set by @workauto/service around every handler; iterateForTenant for a streaming
 * handler, whose body runs at each read); a pool checkout in a scope waits while the tenant holds
 * its share, so one tenant's slow requests cannot hold every connection and make the other
 * tenants' requests queue behind them. Work outside any scope (consumers, workers, migrations) is
 * not counted.
 *
 * The wait is the tenant's own queue: it ends before the caller's deadline (with a margin for the
 * answer to travel), as a TenantShareBusyError that callers map to "too many requests" (429), so a
 * queue one tenant made never reaches the client as the service's timeout or outage (which opens
 * circuit breakers for every tenant).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface CallScope {
  tenant: string;
  /** Connections this call holds now: a call that holds one gets more without waiting (no deadlock on itself). */
  held: number;
  /** When the caller stops waiting (epoch ms), if it said. */
  deadline: number | undefined;
}

/** What a tenant's call says about itself beside its tenant. */
export interface TenantScopeOptions {
  /** The caller's deadline (epoch ms): a wait for the tenant's share ends DEADLINE_MARGIN_MS before it. */
  deadline?: number | undefined;
}

/** How long before the caller's deadline a wait for the share gives up, so its 429 reaches the caller in time. */
const DEADLINE_MARGIN_MS = 250;

const scope = new AsyncLocalStorage<CallScope>();

const newScope = (tenant: string, opts: TenantScopeOptions): CallScope => ({
  tenant,
  held: 0,
  deadline: opts.deadline,
});

/** Runs fn as work of the tenant (no tenant: unscoped). */
export function runForTenant<T>(tenant: string | undefined, fn: () => T, opts: TenantScopeOptions = {}): T {
  return tenant ? scope.run(newScope(tenant, opts), fn) : fn();
}

/**
 * The items of `iterable` (a streaming handler's generator), each read in the tenant's scope: a
 * generator's body runs at each next(), in the context of whoever reads it, not where it was made.
 */
export function iterateForTenant<T>(
  tenant: string | undefined,
  iterable: AsyncIterable<T>,
  opts: TenantScopeOptions = {},
): AsyncIterable<T> {
  if (!tenant) return iterable;
  const call = newScope(tenant, opts);
  return {
    [Symbol.asyncIterator]() {
      const it = iterable[Symbol.asyncIterator]();
      return {
        next: () => scope.run(call, () => it.next()),
        return: (value?: unknown) =>
          scope.run(call, () => it.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined })),
        throw: (err?: unknown) => scope.run(call, () => it.throw?.(err) ?? Promise.reject(err)),
      } as AsyncIterator<T>;
    },
  };
}

/**
 * The error of a checkout that waited for the tenant's share until the pool's connection timeout,
 * or until just before the caller's deadline. The tenant's own queue: "too many requests", never
 * "the database is unavailable" (libs/grpc maps it to 429 TENANT_DATABASE_BUSY).
 */
export class TenantShareBusyError extends Error {
  override name = 'TenantShareBusyError';
  constructor(readonly share: number) {
    super(
      `this tenant's requests hold all ${share} of the database connections one tenant may use in this service; retry when some have finished`,
    );
  }
}

/** Per-tenant counting semaphores over a pool's checkouts. */
export class TenantShares {
  private readonly tenants = new Map<string, { inUse: number; waiting: (() => void)[] }>();

  constructor(
    /** Connections one tenant may hold at once. */
    readonly share: number,
    /** How long a checkout waits for its tenant's share before it fails (at most until the caller's deadline). */
    private readonly waitMs: number,
  ) {}

  /**
   * A slot for the current call's tenant, or none needed (outside a scope, or a call that holds a
   * connection already): what gives it back, and what the call's checkout count does. Returned at
   * once when the tenant is under its share (every checkout but a queued one: no promise for it),
   * a promise when the checkout waits; throws TenantShareBusyError when it may not wait.
   */
  acquire(): TenantSlot | undefined | Promise<TenantSlot> {
    const call = scope.getStore();
    if (!call) return undefined;
    let out = false;
    const counted = {
      checkedOut: () => {
        out = true;
        call.held++;
      },
      returned: () => {
        if (out) call.held--;
        out = false;
      },
    };
    if (call.held > 0) return { release: counted.returned, checkedOut: counted.checkedOut };
    let entry = this.tenants.get(call.tenant);
    if (!entry) this.tenants.set(call.tenant, (entry = { inUse: 0, waiting: [] }));
    const t = entry;
    let released = false;
    const slot: TenantSlot = {
      checkedOut: counted.checkedOut,
      release: () => {
        if (released) return;
        released = true;
        counted.returned();
        // The slot passes straight to the tenant's next waiting checkout, if any.
        const next = t.waiting.shift();
        if (next) return next();
        t.inUse--;
        if (t.inUse === 0) this.tenants.delete(call.tenant);
      },
    };
    if (t.inUse < this.share) {
      t.inUse++;
      return slot;
    }
    const waitMs = Math.min(
      this.waitMs,
      call.deadline === undefined ? Infinity : call.deadline - DEADLINE_MARGIN_MS - Date.now(),
    );
    if (waitMs <= 0) throw new TenantShareBusyError(this.share);
    return new Promise<TenantSlot>((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(slot);
      };
      const timer = setTimeout(() => {
        t.waiting.splice(t.waiting.indexOf(wake), 1);
        reject(new TenantShareBusyError(this.share));
      }, waitMs);
      t.waiting.push(wake);
    });
  }
}

/** A checkout's hold on its tenant's share (TenantShares.acquire). */
export interface TenantSlot {
  /** Gives the slot back (once; later calls do nothing): to the tenant's next waiting checkout, if any. */
  release(): void;
  /** The checkout got its connection: the call holds one more. */
  checkedOut(): void;
}
