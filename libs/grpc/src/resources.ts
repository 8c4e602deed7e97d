/**
 * What a service opened (pool, consumers, relay, server), closed in reverse order: on stop, and
 * when start-up fails half-way, so a failed start never leaves a pool or a Kafka client holding
 * the process open.
 */
export class Resources {
  private readonly closers: Array<() => unknown> = [];

  /** Registers how to close something just opened; returns it for chaining. */
  add<T>(resource: T, close: (resource: T) => unknown): T {
    this.closers.push(() => close(resource));
    return resource;
  }

  /** Closes everything, newest first; every closer runs even if one fails (the first error is thrown). */
  async close(): Promise<void> {
    let first: { err: unknown } | undefined;
    while (this.closers.length) {
      try {
        await this.closers.pop()!();
      } catch (err) {
        first ??= { err };
      }
    }
    if (first) throw first.err;
  }

  /** Runs start-up; if it throws, closes what it had opened and rethrows. */
  async start<T>(steps: (resources: this) => Promise<T>): Promise<T> {
    try {
      return await steps(this);
    } catch (err) {
      await this.close().catch(() => undefined);
      throw err;
    }
  }
}
