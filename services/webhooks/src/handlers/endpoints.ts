import { newId, withTransaction, type PoolClient } from '@workauto/db';
import { EVENT_TYPES, recordEvent } from '@workauto/events';
import {
  changedFields,
  errors,
  parsePage,
  patchNulls,
  textOrNull,
  toPage,
  validate,
  type CallContext,
  type Handlers,
  type Validator,
} from '@workauto/grpc';
import type { WebhooksServiceService } from '@workauto/protos/workauto/webhooks/v1/webhooks.js';
import { channelRefusal, eventTypeRefusal } from '../domain/filters.js';
import { newSigningSecret } from '../domain/signing.js';
import { failPending } from '../delivery/endpoint-state.js';
import { sendSigned } from '../delivery/sender.js';
import * as endpoints from '../repo/endpoints.js';
import * as secrets from '../repo/secrets.js';
import { endpointData, secretContext, SOURCE, toEndpoint, type WebhooksDeps } from './common.js';

type H = Handlers<typeof WebhooksServiceService>;

/** event_types / channels: each entry checked (the violation names its index), duplicates dropped; their number is the proto's rule. */
function checkFilter(v: Validator, field: 'event_types' | 'channels', values: readonly string[]): string[] {
  values.forEach((value, i) => {
    const why = field === 'event_types' ? eventTypeRefusal(value, EVENT_TYPES) : channelRefusal(value);
    if (why) v.add(`${field}[${i}]`, why);
  });
  return [...new Set(values)];
}

/** The plaintext secrets that sign now, newest first. */
async function currentSecrets(
  deps: Pick<WebhooksDeps, 'pool' | 'keyring'>,
  tenantId: string,
  endpointId: string,
): Promise<string[]> {
  const stored = await secrets.signingSecrets(deps.pool, tenantId, endpointId);
  return stored.map((c) => deps.keyring.decrypt(c, secretContext(tenantId, endpointId)));
}

/** Callers below admin on webhooks see endpoint URLs reduced: paths and queries often carry tokens. */
const fullUrl = (ctx: CallContext) => ctx.allows('webhooks', 'admin');

function endpointLimitReached(max: number) {
  return errors.failedPrecondition(
    'WEBHOOK_ENDPOINT_LIMIT_REACHED',
    `this tenant has reached its limit of ${max} webhook endpoints (enabled and disabled ones count); delete one you no longer use (DELETE /api/v1/webhook-endpoints/{id}), or, when self-hosting, raise WEBHOOK_MAX_ENDPOINTS`,
  );
}

async function lockEndpoint(tx: PoolClient, tenantId: string, id: string): Promise<endpoints.EndpointRow> {
  const row = await endpoints.findEndpoint(tx, tenantId, id, { forUpdate: true });
  if (!row) throw errors.notFound('webhook_endpoint', id);
  return row;
}

export function endpointHandlers(
  deps: WebhooksDeps,
): Pick<
  H,
  | 'createWebhookEndpoint'
  | 'listWebhookEndpoints'
  | 'getWebhookEndpoint'
  | 'updateWebhookEndpoint'
  | 'deleteWebhookEndpoint'
  | 'rotateWebhookEndpointSecret'
  | 'testWebhookEndpoint'
  | 'listWebhookEventTypes'
> {
  const { pool, keyring, egress, settings } = deps;
  return {
    async createWebhookEndpoint(req, ctx) {
      if (!req.url) throw errors.invalidField('url', 'is required: the https URL that receives the deliveries');
      // Stored as written (whitespace is refused, not trimmed): every connection checks it again (libs/egress).
      egress.checkUrl(req.url, 'url');
      const url = req.url;
      const v = validate();
      const eventTypes = checkFilter(v, 'event_types', req.event_types);
      const channels = checkFilter(v, 'channels', req.channels);
      v.done();
      const secret = newSigningSecret();
      return withTransaction(
        pool,
        async (tx) => {
          if ((await endpoints.lockAndCountLive(tx, ctx.tenant)) >= settings.maxEndpoints)
            throw endpointLimitReached(settings.maxEndpoints);
          const row = await endpoints.insertEndpoint(tx, {
            id: newId(),
            tenant_id: ctx.tenant,
            url,
            description: textOrNull(req.description) ?? null,
            event_types: eventTypes,
            channels,
            metadata: req.metadata ?? {},
          });
          await secrets.rotateSecret(
            tx,
            ctx.tenant,
            row.id,
            keyring.encrypt(secret, secretContext(ctx.tenant, row.id)),
            0,
          );
          await recordEvent(tx, SOURCE, ctx, {
            type: 'webhook_endpoint.created',
            resourceType: 'webhook_endpoint',
            resourceId: row.id,
            data: endpointData(row),
          });
          return toEndpoint(row, { signingSecret: secret, fullUrl: fullUrl(ctx) });
        },
        { signal: ctx.signal },
      );
    },

    async listWebhookEndpoints(req, ctx) {
      return toPage(await endpoints.listEndpoints(pool, ctx.tenant, parsePage(req)), (r) =>
        toEndpoint(r, { fullUrl: fullUrl(ctx) }),
      );
    },

    async getWebhookEndpoint(req, ctx) {
      const row = await endpoints.findEndpoint(pool, ctx.tenant, req.id);
      if (!row) throw errors.notFound('webhook_endpoint', req.id);
      return toEndpoint(row, { fullUrl: fullUrl(ctx) });
    },

    async updateWebhookEndpoint(patchRequest, ctx) {
      const v = validate();
      const { req } = patchNulls(patchRequest, { text: ['description'] }, v);
      const mask = new Set(req.update_mask ?? []);
      if (req.url !== undefined) egress.checkUrl(req.url, 'url');
      const url = req.url;
      // Repeated fields have no presence: the mask says whether the body carried them (null clears).
      const eventTypes = mask.has('event_types') ? checkFilter(v, 'event_types', req.event_types) : undefined;
      const channels = mask.has('channels') ? checkFilter(v, 'channels', req.channels) : undefined;
      v.done();
      return withTransaction(
        pool,
        async (tx) => {
          const current = await lockEndpoint(tx, ctx.tenant, req.id);
          const patch: endpoints.EndpointPatch = {
            url,
            description: textOrNull(req.description),
            event_types: eventTypes,
            channels,
            metadata: req.metadata,
          };
          if (req.is_enabled === false && current.is_enabled) {
            Object.assign(patch, { is_enabled: false, disabled_at: new Date(), disabled_reason: 'disabled by a user' });
          } else if (req.is_enabled === true) {
            // Enabled again: a fresh start, the failure streak forgotten.
            Object.assign(patch, { is_enabled: true, disabled_at: null, disabled_reason: null, failing_since: null });
          }
          const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, patch);
          if (!row.is_enabled && current.is_enabled) await failPending(tx, ctx.tenant, row.id);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'webhook_endpoint.updated',
            resourceType: 'webhook_endpoint',
            resourceId: row.id,
            data: endpointData(row),
            metadata: changedFields({
              url,
              description: patch.description,
              event_types: eventTypes,
              channels,
              metadata: req.metadata,
              is_enabled: req.is_enabled,
            }),
          });
          return toEndpoint(row, { fullUrl: fullUrl(ctx) });
        },
        { signal: ctx.signal },
      );
    },

    async deleteWebhookEndpoint(req, ctx) {
      return withTransaction(
        pool,
        async (tx) => {
          const current = await lockEndpoint(tx, ctx.tenant, req.id);
          const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, { deleted_at: new Date() });
          await failPending(tx, ctx.tenant, row.id);
          await recordEvent(tx, SOURCE, ctx, {
            type: 'webhook_endpoint.deleted',
            resourceType: 'webhook_endpoint',
            resourceId: row.id,
            data: endpointData(row),
          });
          return {};
        },
        { signal: ctx.signal },
      );
    },

    async rotateWebhookEndpointSecret(req, ctx) {
      const secret = newSigningSecret();
      return withTransaction(
        pool,
        async (tx) => {
          const current = await lockEndpoint(tx, ctx.tenant, req.id);
          const previousExpiresAt = await secrets.rotateSecret(
            tx,
            ctx.tenant,
            current.id,
            keyring.encrypt(secret, secretContext(ctx.tenant, current.id)),
            settings.secretGraceMs,
          );
          const row = await endpoints.updateEndpoint(tx, ctx.tenant, current.id, {});
          await recordEvent(tx, SOURCE, ctx, {
            type: 'webhook_endpoint.secret_rotated',
            resourceType: 'webhook_endpoint',
            resourceId: row.id,
            data: endpointData(row),
            metadata: { previous_secret_expires_at: previousExpiresAt ?? null },
          });
          return toEndpoint(row, { signingSecret: secret, fullUrl: fullUrl(ctx) });
        },
        { signal: ctx.signal },
      );
    },

    async testWebhookEndpoint(req, ctx) {
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
    },

    async listWebhookEventTypes() {
      return { data: EVENT_TYPES.map((t) => ({ name: t.name, description: t.description })) };
    },
  };
}
