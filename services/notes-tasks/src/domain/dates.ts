// RFC 3339 is read in one place for the whole API (the gateway's JSON mapping included).
export { parseTimestamp } from '@workauto/protos';

/** 00:00 UTC of a YYYY-MM-DD date. */
export function startOfDateUtc(date: string): Date {
  return new Date(`${date}T00:00:00Z`);
}
