import { setTimeout as sleep } from 'node:timers/promises';

/** What a check answers while the condition does not hold yet. */
type NotYet = false | undefined | null;

/**
 * The one way tests wait for something: polls `check` every `everyMs` until it answers something
 * other than false, undefined or null, and returns that (`true`, or the record it found); throws
 * naming `what` after `ms` (a function is asked then, to say what it saw). The timeout is a bound on a hang, not a speed target (those live in
 * `make bench`), so it is generous: the machine may be loaded.
 */
export async function eventually<T>(
  what: string | (() => string),
  check: () => T | NotYet | Promise<T | NotYet>,
  ms = 20_000,
  everyMs = 20,
): Promise<Exclude<T, NotYet>> {
  const end = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== false && found !== undefined && found !== null) return found as Exclude<T, NotYet>;
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${typeof what === 'string' ? what : what()}`);
    await sleep(everyMs);
  }
}
