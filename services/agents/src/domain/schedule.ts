import { Cron } from 'croner';

/** The shorthands a schedule accepts (docs/agents.md "Configs") besides 5- and 6-field expressions. */
const SHORTHANDS = ['@hourly', '@daily', '@weekly', '@monthly', '@yearly'];

function cron(schedule: string): Cron {
  return new Cron(schedule, { timezone: 'UTC', paused: true, mode: '5-or-6-parts' });
}

/** Why a schedule is refused, or undefined for a valid one (croner parses it; evaluated in UTC). */
export function scheduleProblem(schedule: string): string | undefined {
  const s = schedule.trim();
  if (s.startsWith('@') && !SHORTHANDS.includes(s.toLowerCase()))
    return `must be a cron expression of 5 fields, or 6 with seconds, or one of ${SHORTHANDS.join(', ')}`;
  try {
    if (!cron(s).nextRun()) return 'never fires after now; give a schedule with future ticks';
    return undefined;
  } catch (err) {
    return `is not a cron expression croner accepts (${(err as Error).message.replace(/^CronPattern: /, '')}); use 5 fields (minute hour day month weekday), or 6 with seconds first`;
  }
}

/** The first tick strictly after `after`, or null when the schedule has none. */
export function nextTick(schedule: string, after: Date): Date | null {
  return cron(schedule.trim()).nextRun(after);
}

/** The latest tick at or before `now`, or null (after downtime only this one runs). */
export function latestTick(schedule: string, now: Date): Date | null {
  // previousRuns counts from strictly before its reference; a tick exactly at now is included.
  return cron(schedule.trim()).previousRuns(1, new Date(now.getTime() + 1))[0] ?? null;
}
