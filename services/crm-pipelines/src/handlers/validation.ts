import type { Validator } from '@workauto/grpc';
import { confidenceProblem, normalizeCurrency } from '../domain/money.js';

/** Field checks shared by the handlers, added to one Validator so a request's problems come together. */
export function checkConfidence(v: Validator, field: string, value: number | undefined): Validator {
  if (value === undefined) return v;
  const problem = confidenceProblem(value);
  return problem ? v.add(field, problem) : v;
}

export function checkCurrency(v: Validator, field: string, value: string | undefined): Validator {
  return value === undefined || normalizeCurrency(value)
    ? v
    : v.add(field, 'must be an ISO 4217 currency code like USD or EUR');
}
