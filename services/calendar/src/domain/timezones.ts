import { Temporal } from 'temporal-polyfill';
import { RecurrenceError } from './errors.js';

/**
 * IANA time zone names (`America/New_York`, `Europe/Berlin`, `UTC`), checked against the time zone
 * database Temporal uses, the same one that expands the recurrences. Offsets (`+05:00`) are refused:
 * an offset has no DST rules, so a series in it would not follow the place the user is in.
 */
export function canonicalTimezone(name: string, field = 'timezone'): string {
  const hint = 'use an IANA time zone name such as America/New_York, Europe/Berlin or UTC';
  if (name.length === 0 || name.length > 64 || /^[+-]\d/.test(name) || !/^[A-Za-z]/.test(name)) {
    throw new RecurrenceError(field, 'INVALID_TIMEZONE', `${JSON.stringify(name)} is not a time zone: ${hint}`);
  }
  try {
    // Temporal answers with the database's spelling (`america/new_york` → `America/New_York`).
    return Temporal.Instant.fromEpochMilliseconds(0).toZonedDateTimeISO(name).timeZoneId;
  } catch {
    throw new RecurrenceError(field, 'INVALID_TIMEZONE', `${JSON.stringify(name)} is not a known time zone: ${hint}`);
  }
}
