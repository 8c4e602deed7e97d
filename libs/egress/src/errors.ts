/**
 * What an outbound call through the egress policy fails with, one class per thing a caller treats
 * differently (the webhooks worker records each as a failed attempt with its message; the apps
 * probe maps every one to `unreachable`).
 */
export abstract class EgressError extends Error {}

/** The policy refused the destination: the URL, its host name or an address it resolves to. */
export class EgressRefusedError extends EgressError {
  override name = 'EgressRefusedError';
  constructor(readonly reason: string) {
    super(`destination not allowed: ${reason}`);
  }
}

/** No connection or no complete response within the time allowed. */
export class EgressTimeoutError extends EgressError {
  override name = 'EgressTimeoutError';
}

/** The destination could not be reached: DNS failure, connection refused or reset, TLS failure. */
export class EgressConnectionError extends EgressError {
  override name = 'EgressConnectionError';
}

/** The response body passed the size the caller allowed (maxResponseBytes); the rest was not read. */
export class EgressResponseTooLargeError extends EgressError {
  override name = 'EgressResponseTooLargeError';
  constructor(
    readonly limit: number,
    origin: string,
  ) {
    super(`the answer of ${origin} is larger than ${limit} bytes; it was not read further`);
  }
}
