import { setTimeout as sleep } from 'node:timers/promises';

/** Polls check every everyMs until it is true; throws naming `what` after ms. */
export async function eventually(
  what: string,
  check: () => Promise<boolean> | boolean,
  ms = 15_000,
  everyMs = 20,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(everyMs);
  }
}
