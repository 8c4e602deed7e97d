import { newId } from '@workauto/db';
import { errors } from '@workauto/grpc';
import { sendSigned } from '../../delivery/sender.js';
import * as endpoints from '../../repo/endpoints.js';
import * as secrets from '../../repo/secrets.js';
import { secretContext, type WebhooksDeps, type Handler } from '../common.js';

/** The plaintext secrets that sign now, newest first. */
async function currentSecrets(
  deps: Pick<WebhooksDeps, 'pool' | 'keyring'>,
  tenantId: string,
  endpointId: string,
): Promise<string[]> {
  const stored = await secrets.signingSecrets(deps.pool, tenantId, endpointId);
  return stored.map((c) => deps.keyring.decrypt(c, secretContext(tenantId, endpointId)));
}

export function testWebhookEndpoint(deps: WebhooksDeps): Handler<'testWebhookEndpoint'> {
  const { pool, egress, settings } = deps;
  return async (req, ctx) => {
    // Allowed on a disabled endpoint (to check a receiver before enabling it again).
    const row = await endpoints.findEndpoint(pool, ctx.tenant, req.id);
    if (!row) throw errors.notFound('webhook_endpoint', req.id);
    const body = JSON.stringify({
      type: 'webhook.test',
      timestamp: new Date().toISOString(),
      data: { endpoint_id: row.id },
    });
    const result = await sendSigned(egress, {
      url: row.url,
      webhookId: newId(),
      body,
      timeoutMs: settings.testTimeoutMs,
      signal: ctx.signal,
      secrets: await currentSecrets(deps, ctx.tenant, row.id),
    });
    return {
      success: result.success,
      error_message: result.error,
      ...(result.httpStatus !== undefined
        ? { http_status: result.httpStatus, response_time_ms: result.responseTimeMs }
        : {}),
    };
  };
}
