import { RRuleTemporal } from 'rrule-temporal';
import { Temporal } from 'temporal-polyfill';
import { startOfDateUtc } from './dates.js';

/**
 * Recurring tasks. A task's rrule is an RFC 5545 RRULE value (`FREQ=WEEKLY;BYDAY=MO`), expanded in
 * UTC from its anchor (DTSTART: the task's due when the rule or the due last changed). The task's
 * due (due_at, or due_date for date-only tasks) is the current occurrence; completing it moves the
 * due to the next occurrence strictly after it (never skipping one, even when that one is past).
 */

/** The current occurrence of a task: a timestamp, or a calendar date for date-only tasks. */
export type Due = { kind: 'at'; at: Date } | { kind: 'date'; date: string };

const RRULE_MAX_LENGTH = 500;
const PARTS = new Set([
  'FREQ',
  'INTERVAL',
  'COUNT',
  'UNTIL',
  'BYDAY',
  'BYMONTHDAY',
  'BYMONTH',
  'BYYEARDAY',
  'BYWEEKNO',
  'BYSETPOS',
  'BYHOUR',
  'BYMINUTE',
  'BYSECOND',
  'WKST',
]);
const FREQS = new Set(['HOURLY', 'DAILY', 'WEEKLY', 'MONTHLY', 'YEARLY']);
const TIME_PARTS = ['BYHOUR', 'BYMINUTE', 'BYSECOND'];
const PROBE_START = Temporal.ZonedDateTime.from('2026-01-05T09:00:00+00:00[UTC]');

/**
 * Bounds of one rule evaluation: FREQ periods stepped through (1,000 days of a DAILY rule, 1,000
 * years of a YEARLY one) and candidate instants tested. They bound its CPU time too
 * (docs/notes-tasks.md, Recurrence): the library is synchronous, so its work is bounded by count,
 * not by a clock.
 */
const RRULE_EVALUATION_LIMITS = { maxIterations: 1_000, maxCandidateEvaluations: 10_000 } as const;

/** A rule whose next occurrence is not found within RRULE_EVALUATION_LIMITS (or that the library cannot expand). */
export class RecurrenceLimitError extends Error {
  override name = 'RecurrenceLimitError';
}

function ruleOf(rrule: string, dtstart: Temporal.ZonedDateTime): RRuleTemporal {
  return new RRuleTemporal({ rruleString: rrule, dtstart, ...RRULE_EVALUATION_LIMITS });
}

/** rule.next, with the library's failures (its iteration caps included) as RecurrenceLimitError. */
function nextOf(rule: RRuleTemporal, after: Date, inclusive: boolean): Temporal.ZonedDateTime | null {
  try {
    return rule.next(after, inclusive) as Temporal.ZonedDateTime | null;
  } catch (err) {
    throw new RecurrenceLimitError(
      `has no next occurrence within ${RRULE_EVALUATION_LIMITS.maxIterations} of its FREQ periods (${(err as Error).message}); use a coarser FREQ (e.g. FREQ=YEARLY) or fewer BY… parts`,
    );
  }
}

/** `rrule:freq=daily` → `FREQ=DAILY` (the form stored and returned). */
export function normalizeRrule(text: string): string {
  return text
    .trim()
    .replace(/^RRULE:/i, '')
    .toUpperCase();
}

/**
 * Why the rule cannot be a task's recurrence (for a 400), or undefined when it can. With the
 * task's anchor (its due), the rule must also have a next occurrence within the evaluation limits.
 */
export function rruleProblem(text: string, kind: Due['kind'] | undefined, anchor?: Date): string | undefined {
  const rule = normalizeRrule(text);
  if (rule.length === 0 || rule.length > RRULE_MAX_LENGTH)
    return `must be an RRULE value of 1 to ${RRULE_MAX_LENGTH} characters, like FREQ=WEEKLY;BYDAY=MO`;
  if (/\s/.test(rule))
    return 'must be one RRULE value without DTSTART, RDATE or EXDATE lines (the task’s due is the start)';
  const parts = new Map<string, string>();
  for (const part of rule.split(';')) {
    const [key, value, extra] = part.split('=');
    if (!key || !value || extra !== undefined)
      return `has a malformed part ${JSON.stringify(part)} (parts are NAME=VALUE, separated by ;)`;
    if (!PARTS.has(key)) return `has an unsupported part ${key}`;
    if (parts.has(key)) return `has ${key} twice`;
    parts.set(key, value);
  }
  const freq = parts.get('FREQ');
  if (!freq) return 'needs FREQ';
  if (!FREQS.has(freq)) return 'FREQ must be HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY';
  if (parts.has('COUNT') && parts.has('UNTIL')) return 'cannot have both COUNT and UNTIL';
  if (kind === 'date' && (freq === 'HOURLY' || TIME_PARTS.some((p) => parts.has(p)))) {
    return 'of a date-only task (due_date) cannot repeat within a day: use FREQ=DAILY or coarser, without BYHOUR, BYMINUTE or BYSECOND';
  }
  let parsed: RRuleTemporal;
  try {
    parsed = ruleOf(rule, anchor ? zoned(anchor) : PROBE_START);
  } catch (err) {
    return `is not a valid RRULE: ${(err as Error).message}`;
  }
  try {
    nextOf(parsed, anchor ?? new Date(PROBE_START.epochMilliseconds), !anchor);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

function zoned(at: Date): Temporal.ZonedDateTime {
  return Temporal.Instant.fromEpochMilliseconds(at.getTime()).toZonedDateTimeISO('UTC');
}

function instantOf(due: Due): Date {
  return due.kind === 'at' ? due.at : startOfDateUtc(due.date);
}

/**
 * The occurrence strictly after `after` of the rule anchored at `anchor`, or undefined when the
 * series ends. Throws RecurrenceLimitError when it is not found within the evaluation limits.
 */
export function nextOccurrence(rrule: string, anchor: Date, after: Due): Due | undefined {
  const next = nextOf(ruleOf(rrule, zoned(anchor)), instantOf(after), false);
  if (!next) return undefined;
  return after.kind === 'at'
    ? { kind: 'at', at: new Date(next.epochMilliseconds) }
    : { kind: 'date', date: next.toPlainDate().toString() };
}

/** The instant next_occurrence shows for a due (a date: its 00:00 UTC). */
export function dueInstant(due: Due): Date {
  return instantOf(due);
}

/** Orders two dues of the same kind: negative when a is earlier. */
export function compareDue(a: Due, b: Due): number {
  if (a.kind === 'at' && b.kind === 'at') return a.at.getTime() - b.at.getTime();
  if (a.kind === 'date' && b.kind === 'date') return a.date < b.date ? -1 : a.date > b.date ? 1 : 0;
  return instantOf(a).getTime() - instantOf(b).getTime();
}
