import type { ProviderTarget } from './types.js';

/** How long a client is kept after it was made; a key replaced meanwhile gets a client of its own at once. */
const CLIENT_TTL_MS = 5 * 60_000;
/** Clients kept at most (one per tenant key and settings in use), the oldest dropped first. */
const MAX_CLIENTS = 256;

/**
 * An adapter's SDK clients, one per key, server and call settings, made once and kept a few
 * minutes. A client builds every resource of its API when made (≈ 90 µs of CPU each in a run's
 * profile) and a run calls its provider at least twice with the same key (docs/benchmarks.md,
 * "Agent runs"). Keyed by the key itself, so a run after a key's replacement never uses a client
 * of the old key; the old client ages out, unused.
 */
export class SdkClients<Client> {
  private readonly clients = new Map<string, { client: Client; until: number }>();

  constructor(private readonly make: (target: ProviderTarget, timeoutMs: number, maxRetries: number) => Client) {}

  get(target: ProviderTarget, timeoutMs: number, maxRetries: number): Client {
    const id = `${timeoutMs} ${maxRetries} ${target.baseURL ?? ''} ${target.apiKey}`;
    const now = Date.now();
    const kept = this.clients.get(id);
    if (kept && now < kept.until) return kept.client;
    const client = this.make(target, timeoutMs, maxRetries);
    this.clients.delete(id); // re-inserted last: the map's order is the order of making
    if (this.clients.size >= MAX_CLIENTS) this.clients.delete(this.clients.keys().next().value!);
    this.clients.set(id, { client, until: now + CLIENT_TTL_MS });
    return client;
  }
}
