/**
 * The weighting rule of the pipeline summary (contract §5), as pure decimal arithmetic. The summary
 * itself is one SQL aggregation over NUMERIC columns that applies this same rule; these functions
 * state it in code and are unit-tested.
 */
export type StageType = 'open' | 'won' | 'lost';

/** won → 1, lost → 0, open → the deal's confidence ?? the stage's default ?? 0 (decimal text). */
export function effectiveConfidence(
  stageType: StageType,
  dealConfidence: string | null,
  stageDefault: string | null,
): string {
  if (stageType === 'won') return '1';
  if (stageType === 'lost') return '0';
  return dealConfidence ?? stageDefault ?? '0';
}

/** An exact decimal: value = units / 10^scale. */
export interface Decimal {
  units: bigint;
  scale: number;
}

export function parseDecimal(text: string): Decimal {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!m) throw new Error(`not a decimal: ${text}`);
  const frac = m[3] ?? '';
  const units = BigInt(m[2]! + frac);
  return { units: m[1] ? -units : units, scale: frac.length };
}

function rescale(d: Decimal, scale: number): bigint {
  return d.units * 10n ** BigInt(scale - d.scale);
}

export function add(a: Decimal, b: Decimal): Decimal {
  const scale = Math.max(a.scale, b.scale);
  return { units: rescale(a, scale) + rescale(b, scale), scale };
}

export function multiply(a: Decimal, b: Decimal): Decimal {
  return { units: a.units * b.units, scale: a.scale + b.scale };
}

/** Rounds half away from zero (as PostgreSQL's round(numeric, n)) to `digits` decimals. */
export function round(d: Decimal, digits: number): Decimal {
  if (d.scale <= digits) return { units: rescale(d, digits), scale: digits };
  const divisor = 10n ** BigInt(d.scale - digits);
  const negative = d.units < 0n;
  const abs = negative ? -d.units : d.units;
  let q = abs / divisor;
  if ((abs % divisor) * 2n >= divisor) q += 1n;
  return { units: negative ? -q : q, scale: digits };
}

export function formatDecimal(d: Decimal): string {
  const negative = d.units < 0n;
  const digits = (negative ? -d.units : d.units).toString().padStart(d.scale + 1, '0');
  const text = d.scale === 0 ? digits : `${digits.slice(0, -d.scale)}.${digits.slice(-d.scale)}`;
  return negative ? `-${text}` : text;
}

/** amount × effective confidence, exact (round it only at the end of a sum). */
export function weightedValue(
  amount: string,
  stageType: StageType,
  dealConfidence: string | null,
  stageDefault: string | null,
): Decimal {
  return multiply(parseDecimal(amount), parseDecimal(effectiveConfidence(stageType, dealConfidence, stageDefault)));
}
