/**
 * An integer setting read from the environment where it is used (libs/db has no config schema of
 * its own): unset or empty gives the default; anything else outside min..max throws, naming the
 * variable, what it should be and how to get the default.
 */
export function integerFromEnv(
  name: string,
  fallback: number,
  range: { min: number; max?: number; what: string },
): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < range.min || (range.max !== undefined && value > range.max)) {
    throw new Error(`${name} must be ${range.what} (got ${JSON.stringify(raw)}); unset it for ${fallback}`);
  }
  return value;
}
