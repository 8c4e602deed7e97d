import { errors } from '@workauto/grpc';

/** Why a recurrence input was refused; each one is a 400 INVALID_ARGUMENT on `field` for the API. */
export type RecurrenceErrorKind =
  | 'INVALID_RRULE'
  | 'INVALID_TIMEZONE'
  | 'INVALID_EVENT_TIMES'
  | 'INVALID_WINDOW'
  | 'TOO_MANY_OCCURRENCES'
  | 'RULE_TOO_COSTLY'
  | 'NOT_AN_OCCURRENCE';

/**
 * A refused recurrence input. The calendar service maps it once to a field violation
 * (`errors.invalidField(field, message)` of libs/grpc); the message says what to change.
 */
export class RecurrenceError extends Error {
  override name = 'RecurrenceError';
  constructor(
    readonly field: string,
    readonly kind: RecurrenceErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** Runs recurrence-engine work; its refusals become the 400 on the field they name. */
export function recurrence<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    if (err instanceof RecurrenceError) throw errors.invalidField(err.field, err.message);
    throw err;
  }
}
