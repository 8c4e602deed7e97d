import { errors, type FieldViolation } from './errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Deliberately loose (as most APIs are): one @, no spaces, a dot in the domain.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * Collects field violations of one request and throws them together as one INVALID_ARGUMENT,
 * so a client learns every bad field at once.
 */
export class Validator {
  private readonly violations: FieldViolation[] = [];

  add(field: string, description: string): this {
    this.violations.push({ field, description });
    return this;
  }

  uuid(field: string, value: string | undefined, opts: { required?: boolean } = {}): this {
    if (value === undefined || value === '') {
      if (opts.required) this.add(field, 'is required (a UUID)');
    } else if (!UUID.test(value)) this.add(field, `must be a UUID, got ${JSON.stringify(value.slice(0, 64))}`);
    return this;
  }

  /** Trimmed length between min and max characters. */
  text(field: string, value: string | undefined, opts: { required?: boolean; min?: number; max: number }): this {
    if (value === undefined) {
      if (opts.required) this.add(field, 'is required');
      return this;
    }
    const len = value.trim().length;
    const min = opts.min ?? 1;
    if (len < min || len > opts.max) this.add(field, `must be ${min} to ${opts.max} characters (after trimming)`);
    return this;
  }

  email(field: string, value: string | undefined, opts: { required?: boolean } = {}): this {
    if (value === undefined || value === '') {
      if (opts.required) this.add(field, 'is required (an email address)');
    } else if (value.length > 320 || !EMAIL.test(value.trim())) this.add(field, 'must be an email address like name@example.com');
    return this;
  }

  check(condition: boolean, field: string, description: string): this {
    if (!condition) this.add(field, description);
    return this;
  }

  /** Throws INVALID_ARGUMENT listing every violation, if there is any. */
  done(): void {
    if (this.violations.length) throw errors.invalidArgument(this.violations);
  }
}

export function validate(): Validator {
  return new Validator();
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** A real calendar date in YYYY-MM-DD form (2026-02-30 is not). */
export function isIsoDate(text: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  return y >= 1 && date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
}
