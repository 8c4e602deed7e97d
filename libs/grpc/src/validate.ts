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
    } else if (value.length > 320 || !EMAIL.test(value.trim()))
      this.add(field, 'must be an email address like name@example.com');
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

/** A real calendar date in YYYY-MM-DD form: the API's one date check lives with its timestamp parser. */
export { isIsoDate } from '@workauto/protos';

/**
 * What a PATCH clears: the fields named in its update_mask (the gateway lists the JSON body's
 * keys, AIP-134) but sent without a value (null). Text, id and date fields come back as '' in
 * `req` (each service's "clear" for them); the `other` clearable fields (numbers, timestamps) are
 * in `cleared`. A null on any other field (one that cannot be empty) is a violation on `v`.
 */
export function patchNulls<R extends { update_mask?: string[] | undefined }>(
  req: R,
  clearable: { text?: readonly string[]; other?: readonly string[] },
  v: Validator,
): { req: R; cleared: Set<string> } {
  const text = clearable.text ?? [];
  const other = clearable.other ?? [];
  const cleared = new Set<string>();
  const empty: Record<string, string> = {};
  for (const field of req.update_mask ?? []) {
    if ((req as Record<string, unknown>)[field] !== undefined) continue;
    if (text.includes(field)) empty[field] = '';
    else if (other.includes(field)) cleared.add(field);
    else v.add(field, 'cannot be null here (it cannot be empty); leave it out to keep its value');
  }
  return { req: Object.keys(empty).length ? { ...req, ...empty } : req, cleared };
}
