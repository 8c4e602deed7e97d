/**
 * Money and confidence rules. Amounts travel as JSON numbers but are stored and summed as exact
 * decimals (NUMERIC): a number is accepted only when its shortest decimal form (what
 * JSON.stringify prints, and what the client wrote) has no more decimals than the currency's minor
 * unit, and that decimal text is what reaches SQL — never a binary float.
 */

/** Largest accepted amount: 15 significant digits with the decimals, so every value survives a double exactly. */
const MAX_AMOUNT = 1_000_000_000_000;
/** Decimals a confidence fraction may carry (0.1234 = 12.34 %). */
const CONFIDENCE_DECIMALS = 4;

const ISO_CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** `usd` → `USD` when it is an ISO 4217 code, else undefined. */
export function normalizeCurrency(code: string): string | undefined {
  const upper = code.trim().toUpperCase();
  return /^[A-Z]{3}$/.test(upper) && ISO_CURRENCIES.has(upper) ? upper : undefined;
}

/** Minor-unit decimals by ISO code, filled on first use: a NumberFormat costs ~8 µs and feeds the GC. */
const minorDigitsByCurrency = new Map<string, number>();

/** Decimals of the currency's minor unit (USD 2, JPY 0, KWD 3), from ICU's ISO 4217 data. */
export function minorUnitDigits(currency: string): number {
  const known = minorDigitsByCurrency.get(currency);
  if (known !== undefined) return known;
  const digits =
    new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  // Only ISO codes are kept, so the map stays as small as ICU's list whatever callers pass.
  if (ISO_CURRENCIES.has(currency)) minorDigitsByCurrency.set(currency, digits);
  return digits;
}

/** The plain decimal text of a finite non-negative number (`19.99`), or undefined for exponent forms and negatives. */
function decimalText(value: number): string | undefined {
  if (!Number.isFinite(value)) return undefined;
  const text = String(value);
  return /^\d+(\.\d+)?$/.test(text) ? text : undefined;
}

function decimals(text: string): number {
  const dot = text.indexOf('.');
  return dot < 0 ? 0 : text.length - dot - 1;
}

/** What is wrong with an amount whatever its currency (sign, size, notation), or undefined. */
export function amountRangeProblem(value: number): string | undefined {
  return decimalText(value) === undefined || value > MAX_AMOUNT
    ? `must be a number from 0 to ${MAX_AMOUNT}`
    : undefined;
}

/** What is wrong with an amount in this currency, or undefined when it is fine. */
export function amountProblem(value: number, currency: string): string | undefined {
  const range = amountRangeProblem(value);
  if (range) return range;
  const digits = minorUnitDigits(currency);
  const text = decimalText(value)!;
  if (decimals(text) > digits)
    return `must have at most ${digits} decimal${digits === 1 ? '' : 's'} in ${currency}, got ${text}`;
  return undefined;
}

/**
 * What is wrong with a stored amount (NUMERIC text such as `10.5000`) in another currency, or
 * undefined: a deal moved to a pipeline of another currency keeps its amount only if it fits.
 */
export function storedAmountProblem(amount: string, currency: string): string | undefined {
  const digits = minorUnitDigits(currency);
  const text = amount.includes('.') ? amount.replace(/0+$/, '').replace(/\.$/, '') : amount;
  if (decimals(text) > digits)
    return `has ${decimals(text)} decimals (${text}) but ${currency} allows at most ${digits}`;
  return undefined;
}

/** The exact decimal text of a valid amount (call amountProblem first). */
export function amountDecimal(value: number): string {
  return decimalText(value)!;
}

export function confidenceProblem(value: number): string | undefined {
  const text = decimalText(value);
  if (text === undefined || value > 1) return 'must be a fraction from 0 to 1';
  if (decimals(text) > CONFIDENCE_DECIMALS) return `must have at most ${CONFIDENCE_DECIMALS} decimals`;
  return undefined;
}

/** NUMERIC text from PostgreSQL → the JSON number of the API (null stays null). */
export function toNumber(numeric: string | null): number | undefined {
  return numeric === null ? undefined : Number(numeric);
}
