/**
 * A tenant's share of a service's database connections. Calls run in their tenant's scope
 * (runForTenant, set by @workauto/service around every handler); a pool checkout in a scope waits
 * while the tenant holds its share, so one tenant's slow requests cannot hold every connection and
 * make the other tenants' requests queue behind them. Work outside any scope (consumers, workers,
 * migrations) is not counted.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface CallScope {
  tenant: string;
  /** Connections this call holds now: a call that holds one gets more without waiting (no deadlock on itself). */
  held: number;
}

const scope = new AsyncLocalStorage<CallScope>();

/** Runs fn as work of the tenant (no tenant: unscoped). */
export function runForTenant<T>(tenant: string | undefined, fn: () => T): T {
  return tenant ? scope.run({ tenant, held: 0 }, fn) : fn();
}

/** The error of a checkout that waited longer than the pool's connection timeout for the tenant's share. */
export class TenantShareBusyError extends Error {
  override name = 'TenantShareBusyError';
  /** too_many_connections: the same condition as PostgreSQL's, and it passes as the tenant's requests end. */
  readonly code = '53300';
  constructor(share: number) {
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
    /** How long a checkout waits for its tenant's share before it fails. */
    private readonly waitMs: number,
  ) {}

  /**
   * A slot for the current call's tenant, or none needed (outside a scope, or a call that holds a
   * connection already); resolves to what gives it back, and to what the call's checkout count does.
   */
  async acquire(): Promise<{ release(): void; checkedOut(): void } | undefined> {
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
    if (t.inUse >= this.share) {
      await new Promise<void>((resolve, reject) => {
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          t.waiting.splice(t.waiting.indexOf(wake), 1);
          reject(new TenantShareBusyError(this.share));
        }, this.waitMs);
        t.waiting.push(wake);
      });
    } else t.inUse++;
    let released = false;
    return {
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
  }
}
