/** Standard Webhooks signing (the standardwebhooks package; never a hand-rolled HMAC format). */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** `whsec_` + base64 of 32 random bytes (docs/webhooks.md "What a receiver must do"). */
export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The webhook-signature header: `v1,<sig>` per secret, space-separated, in the order given (the
 * newest secret first during a rotation's grace).
 */
export function signatureHeader(secrets: readonly string[], webhookId: string, timestamp: Date, body: string): string {
  return secrets.map((s) => new Webhook(s).sign(webhookId, timestamp, body)).join(' ');
}

/** The Standard Webhooks request headers of one attempt (timestamp = this attempt's time). */
export function webhookHeaders(
  secrets: readonly string[],
  webhookId: string,
  body: string,
  now = new Date(),
): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': webhookId,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': signatureHeader(secrets, webhookId, now, body),
  };
}
