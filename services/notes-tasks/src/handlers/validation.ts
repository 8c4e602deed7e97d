import { checkHttpUrl, type Validator } from '@workauto/grpc';
import { LIMITS } from './common.js';

// Field checks of this service, added to one Validator so a request's problems come together.

export function checkMinutes(v: Validator, field: string, value: number | undefined): Validator {
  if (value === undefined) return v;
  return Number.isInteger(value) && value >= 0 && value <= LIMITS.minutes
    ? v
    : v.add(field, `must be a whole number of minutes from 0 to ${LIMITS.minutes}`);
}

/** A link the note keeps (source_url): trimmed, then an absolute http(s) URL without whitespace or control characters inside. */
export function checkUrl(v: Validator, field: string, value: string | undefined, clearable = false): Validator {
  if (value === undefined || (clearable && value === '')) return v;
  const text = value.trim(); // surrounding whitespace is trimmed before the URL is stored
  if (!text) return v.add(field, `must be an absolute http(s) URL of at most ${LIMITS.url} characters`);
  return checkHttpUrl(v, field, text, LIMITS.url);
}

/** Length of text that is not trimmed (a note body keeps its whitespace). */
export function checkLength(v: Validator, field: string, value: string | undefined, max: number): Validator {
  return value === undefined || value.length <= max ? v : v.add(field, `must be at most ${max} characters`);
}
