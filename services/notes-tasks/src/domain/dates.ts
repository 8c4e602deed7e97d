const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 timestamp as a Date (millisecond precision), or undefined. */
export function parseTimestamp(text: string): Date | undefined {
  if (!RFC3339.test(text)) return undefined;
  const d = new Date(text.replace(/(\.\d{3})\d+/, '$1'));
  return Number.isNaN(d.getTime()) ? undefined : d;
}

/** 00:00 UTC of a YYYY-MM-DD date. */
export function startOfDateUtc(date: string): Date {
  return new Date(`${date}T00:00:00Z`);
}
