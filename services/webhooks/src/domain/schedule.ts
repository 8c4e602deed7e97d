/** When a delivery's next attempt runs (docs/webhooks.md "How it works": schedule, jitter, Retry-After). Pure. */
import { parseDuration } from '@workauto/config';

/** Delay before each attempt: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (8 attempts, Svix's). */
export const DEFAULT_SCHEDULE = '0s,5s,5m,30m,2h,5h,10h,10h';
/** A Retry-After is honoured up to this long. */
const RETRY_AFTER_MAX_MS = 3_600_000;

/** `0s,1s,2s` → [0, 1000, 2000]; undefined when an entry is not a duration or the list is empty. */
export function parseSchedule(text: string): number[] | undefined {
  const delays = text.split(',').map((s) => parseDuration(s));
  if (!delays.length || delays.some((d) => d === undefined)) return undefined;
  return delays as number[];
}

/** ±20 % jitter, so endpoints that failed together are not retried in lockstep. */
function jittered(ms: number, random = Math.random): number {
  return Math.round(ms * (0.8 + random() * 0.4));
}

/**
 * The delay before attempt `attemptDone + 1` after attempt `attemptDone` (1-based) failed, or
 * undefined when that was the last one. A Retry-After (429/503) waits at least that long.
 */
export function nextDelay(
  schedule: readonly number[],
  attemptDone: number,
  retryAfterMs?: number,
  random = Math.random,
): number | undefined {
  const base = schedule[attemptDone];
  if (base === undefined) return undefined;
  return Math.max(jittered(base, random), retryAfterMs ?? 0);
}

/** Retry-After as delay-seconds or an HTTP date, capped at 1 h; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const text = header.trim();
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : Date.parse(text) - now;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(Math.max(ms, 0), RETRY_AFTER_MAX_MS);
}
