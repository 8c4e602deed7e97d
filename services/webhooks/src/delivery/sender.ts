/** One signed POST to a receiver through the egress policy, and what came of it. */
import { productVersion } from '@workauto/config';
import { EgressError, type EgressPolicy, type EgressResponse } from '@workauto/egress';
import { webhookHeaders } from '../domain/signing.js';
import { retryAfterMs } from '../domain/schedule.js';

export interface AttemptResult {
  success: boolean;
  /** The receiver's status, when it answered. */
  httpStatus?: number;
  responseTimeMs: number;
  /** Why it failed (never a secret). */
  error?: string;
  /** 410 Gone: the receiver asks to be disabled. */
  gone: boolean;
  /** A 429/503's Retry-After (capped at 1 h). */
  retryAfterMs?: number;
}

/** What deliveries say they are: `workauto-webhooks/<the product version>`. */
const userAgent = () => `workauto-webhooks/${productVersion()}`;

export async function sendSigned(
  egress: EgressPolicy,
  req: {
    url: string;
    webhookId: string;
    body: string;
    secrets: readonly string[];
    timeoutMs: number;
    signal?: AbortSignal | undefined;
  },
): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let res: EgressResponse;
  try {
    res = await egress.request(req.url, {
      method: 'POST',
      // Receivers and their firewalls tell deliveries apart by it (and which release sent them).
      headers: { ...webhookHeaders(req.secrets, req.webhookId, req.body), 'user-agent': userAgent() },
      body: req.body,
      timeoutMs: req.timeoutMs,
      signal: req.signal,
    });
  } catch (err) {
    if (err instanceof EgressError)
      return { success: false, gone: false, responseTimeMs: elapsed(), error: err.message };
    throw err;
  }
  const responseTimeMs = elapsed();
  // Receivers' answers are not kept; reading a short one to the end lets the connection be reused.
  await res.discardBody(DRAIN_MAX_BYTES);
  const { status } = res;
  if (status >= 200 && status < 300) return { success: true, gone: false, httpStatus: status, responseTimeMs };
  const header = res.headers['retry-after'];
  const retryAfter =
    status === 429 || status === 503 ? retryAfterMs((Array.isArray(header) ? header[0] : header) ?? null) : undefined;
  const error =
    status >= 300 && status < 400
      ? `the receiver answered ${status}, a redirect, which is never followed; point the endpoint's url at the final address`
      : status === 410
        ? 'the receiver answered 410 Gone: the endpoint was disabled'
        : `the receiver answered ${status}; a 2xx status is success`;
  return {
    success: false,
    gone: status === 410,
    httpStatus: status,
    responseTimeMs,
    error,
    ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
  };
}

/** A longer answer is dropped with its connection, never held. */
const DRAIN_MAX_BYTES = 64 * 1024;
