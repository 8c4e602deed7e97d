/**
 * The one handler behind every annotated route: match → downstream → authenticate and authorize
 * → request message → gRPC call → JSON response. Nothing here knows any endpoint.
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Request, Response } from 'express';
import {
  DomainError,
  IDEMPOTENT_REPLAYED_KEY,
  callerAudience,
  httpBodyHeaders,
  idempotencyScope,
  type Caller,
  type CallerSigner,
  type Downstream,
} from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { ActorType, IdentityServiceService, type Principal } from '@workauto/protos/workauto/identity/v1/identity.js';
import { accessLevels, requestCredential, type Authenticator } from './auth.js';
import { gatewayErrors, toHttpError, type HttpError } from './errors.js';
import { IDEMPOTENCY_HEADER, IdempotencyStore, type StoredResponse } from './idempotency.js';
import { messageToJson } from '@workauto/protos';
import { matchRoute, type Route } from './routes.js';
import { AUTHENTICATED } from './rate-limit.js';
import { PUBLIC_BASE_URL_FIELD } from './public-url.js';
import { buildRequest } from './transcode.js';
import type { StreamKind, StreamPace, StreamSlots } from './stream-slots.js';
import type { StreamWatch } from './stream-watch.js';
import type { TokenTenants } from './token-tenants.js';

/** What the handler needs for streamed responses and requests that carry a token instead of a key. */
export interface StreamAdmission {
  /** Each tenant's streams at once (GATEWAY_TENANT_STREAMS, GATEWAY_TENANT_EVENT_STREAMS). */
  slots: StreamSlots;
  /** How fast each tenant's streams send, together. */
  pace: StreamPace;
  /** Checks open streams' credentials again (an event stream ends once its key is revoked). */
  watch: StreamWatch;
  /** The tenant of a feed token. */
  tokenTenants: TokenTenants;
  /** STREAM_IDLE_TIMEOUT_MS: a client that accepts no bytes for this long is disconnected. */
  idleTimeoutMs: number;
}

const ACTOR_TYPES: Record<number, string> = {
  [ActorType.ACTOR_TYPE_MEMBER]: 'member',
  [ActorType.ACTOR_TYPE_API_KEY]: 'api_key',
  [ActorType.ACTOR_TYPE_PLATFORM_ADMIN]: 'platform_admin',
  [ActorType.ACTOR_TYPE_SYSTEM]: 'system',
};

/** The service whose mutations can change who a token acts for (deactivation, revocation, roles). */
const IDENTITY = 'identity';

/** Audience of the token lookup: identity's service. */
const IDENTITY_AUDIENCE = callerAudience(IdentityServiceService.authenticateToken.path);

/**
 * The caller every downstream call of a request acts for: the request id and the client, and (when
 * authenticated) the principal. Signed per call into x-caller-token (services trust nothing else);
 * unauthenticated routes and the platform admin carry one too, without a tenant.
 */
export function requestCaller(req: Request, requestId: string): Caller {
  const ua = req.get('user-agent');
  return { requestId, ...(req.ip ? { clientIp: req.ip } : {}), ...(ua ? { userAgent: ua.slice(0, 512) } : {}) };
}

/** Each looked-up principal's tenant and actor, made once and frozen: the signer serializes a frozen actor once. */
const principalParts = new WeakMap<Principal, Pick<Caller, 'tenantId' | 'actor'>>();

export function addPrincipal(caller: Caller, principal: Principal): Caller {
  let part = principalParts.get(principal);
  if (!part) {
    part = Object.freeze({
      ...(principal.tenant_id ? { tenantId: principal.tenant_id } : {}),
      actor: Object.freeze({
        type: ACTOR_TYPES[principal.actor_type] ?? 'system',
        id: principal.actor_id,
        ...(principal.member_id ? { memberId: principal.member_id, access: accessLevels(principal) } : {}),
      }),
    });
    principalParts.set(principal, part);
  }
  return { ...caller, ...part };
}

/**
 * A route's method in the shape Downstream.call takes. The request is encoded before the call
 * (encodeRequest), so a message that cannot be encoded is answered here and never reaches the
 * downstream or its circuit breaker as a failed call.
 */
function unaryMethod(route: Route) {
  return {
    path: route.grpcPath,
    requestSerialize: (encoded: Buffer) => encoded,
    responseDeserialize: (b: Buffer) => route.responseType.decode(b),
  };
}

/** The request message's bytes; a value the mapping let through but the codec refuses is the client's 400. */
function encodeRequest(route: Route, request: Record<string, unknown>): Buffer {
  try {
    const bytes = route.requestType.encode(request);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  } catch (err) {
    throw gatewayErrors.badRequest(
      [
        {
          field: '(body)',
          description: `cannot be encoded as ${route.requestType.desc.name}: ${String((err as Error).message).slice(0, 200)}`,
        },
      ],
      'the request cannot be encoded for its service; check the body against /api/v1/openapi.json',
    );
  }
}

export function transcodingHandler(
  routes: Route[],
  downstreams: Map<string, Downstream>,
  auth: Authenticator,
  idempotency: IdempotencyStore,
  signer: CallerSigner,
  logger: Logger,
  /** PUBLIC_BASE_URL: the origin of absolute URLs in responses (default: each request's scheme and Host). */
  publicBaseUrl: string | undefined,
  streams: StreamAdmission,
) {
  const methods = new Map(routes.map((r) => [r, unaryMethod(r)]));
  return async (req: Request, res: Response): Promise<void> => {
    // originalUrl keeps the percent-encoding, so an encoded '/' inside a variable stays inside it.
    const path = req.originalUrl.split('?')[0] ?? '';
    const match = matchRoute(routes, req.method, path);
    if (!match) throw gatewayErrors.routeNotFound(req.method, path.slice(0, 200));
    if ('methodNotAllowed' in match) throw gatewayErrors.methodNotAllowed(req.method, match.methodNotAllowed);
    if ('badPath' in match)
      throw gatewayErrors.badRequest([{ field: match.badPath, description: 'is not valid percent-encoding' }]);
    const { route, params } = match;
    res.locals.route = route.template;
    const anonymous = requestCaller(req, res.locals.requestId as string);
    // Authentication before validation: a caller without a credential learns nothing about the API's input rules.
    // The token lookup's caller is signed only when the lookup is not cached.
    const principal = await auth.authorize(route, req, () => signer.metadata(anonymous, IDENTITY_AUDIENCE));
    if (principal) res.locals[AUTHENTICATED] = true; // the failed-auth limiter never blocks this credential
    let caller = principal ? addPrincipal(anonymous, principal) : anonymous;

    const request = buildRequest(route, params, withLastEventId(route, req), req.body, {
      [PUBLIC_BASE_URL_FIELD]: () => publicBaseUrlOf(req, publicBaseUrl),
    });
    const encoded = encodeRequest(route, request);
    // Client errors first: a missing service is only reported for a request that would have reached it.
    const downstream = downstreams.get(route.downstream);
    if (!downstream) throw gatewayErrors.notConfigured(route.downstream, `${route.downstream.toUpperCase()}_ADDR`);
    let tenant = principal?.tenant_id || undefined;
    if (!principal && route.tokenTenant) {
      // A token instead of a key (a feed URL): admitted under its tenant like a keyed request.
      tenant = await streams.tokenTenants.tenantOf(route, downstream, request, anonymous);
      await auth.admit(req, tenant);
    }

    if (route.stream) {
      // GET only (routes.ts): nothing to record for an Idempotency-Key.
      const credential = principal ? requestCredential(req) : undefined;
      const release = tenant ? streams.slots.acquire(tenant, streamKind(route)) : undefined;
      try {
        return await streamHttpBody(
          res,
          route,
          logger,
          streams.idleTimeoutMs,
          tenant ? (bytes, signal) => streams.pace.spend(tenant, bytes, signal) : undefined,
          (signal) =>
            downstream.stream(methods.get(route)!, encoded, {
              metadata: signer.metadata(caller, callerAudience(route.grpcPath)),
              ...(route.deadlineMs ? { deadlineMs: route.deadlineMs } : {}),
              signal,
              tenant,
            }),
          credential &&
            ((end) =>
              streams.watch.watch({
                credential,
                route,
                metadata: () => signer.metadata(anonymous, IDENTITY_AUDIENCE),
                end,
              })),
        );
      } finally {
        release?.();
      }
    }

    // Every write takes a key (GETs only read: repeating one is always safe).
    const idempotencyKey = req.method !== 'GET' ? IdempotencyStore.parseKey(req.get(IDEMPOTENCY_HEADER)) : undefined;
    const scope = (principal ? requestCredential(req)?.key : undefined) ?? 'anonymous';
    let released: (() => void) | undefined;
    if (idempotencyKey) {
      const begun = await idempotency.begin(
        scope,
        idempotencyKey,
        IdempotencyStore.fingerprint(`${req.method} ${route.template}`, request),
      );
      if (begun.kind === 'replay') return send(res, begun.response, REPLAYED);
      released = idempotency.hold(scope, idempotencyKey);
      // The service records the key with its write, and seals the response it keeps for a retry.
      const idempotencySeal = idempotency.sealFor(idempotencyScope(caller), idempotencyKey);
      caller = { ...caller, idempotencyKey, idempotencySeal };
    }

    let response: Record<string, unknown>;
    let replayed = false as boolean; // set by the onMetadata callback, which TypeScript does not follow
    try {
      response = await downstream.call(methods.get(route)!, encoded, {
        metadata: signer.metadata(caller, callerAudience(route.grpcPath)),
        ...(route.deadlineMs ? { deadlineMs: route.deadlineMs } : {}),
        tenant,
        ...(idempotencyKey
          ? { onMetadata: (md: grpc.Metadata) => (replayed ||= md.get(IDEMPOTENT_REPLAYED_KEY)[0] === 'true') }
          : {}),
      });
    } catch (err) {
      released?.();
      if (idempotencyKey) {
        const failure = toHttpError(err, res.locals.requestId as string);
        // A client error is the service's definite answer and is replayed; anything a retry may
        // change (5xx, deadline, cancellation, lost connection, ABORTED, 429) is not stored: the
        // key is freed so the retry runs again (and the service answers it from its own record).
        if (isDefinite(failure)) await idempotency.record(scope, idempotencyKey, failure);
        else await idempotency.release(scope, idempotencyKey);
      }
      throw err;
    } finally {
      if (route.downstream === IDENTITY && req.method !== 'GET') auth.clear(); // so this replica sees the change at once
    }
    released?.();
    if (route.responseType.desc.typeName === HTTP_BODY) return sendHttpBody(res, route, response);
    const out = render(route, messageToJson(route.responseType.desc, response) as Record<string, unknown>);
    if (idempotencyKey) await idempotency.record(scope, idempotencyKey, out);
    send(res, out, replayed ? REPLAYED : {});
  };
}

/** The header of a response that is the stored first response to a key, not a new one. */
const REPLAYED = { 'Idempotent-Replayed': 'true' };

/** The request field the Last-Event-ID header fills (Server-Sent Events: what an EventSource sends when it reconnects). */
const LAST_EVENT_ID = 'last_event_id';

/**
 * The query, with `last_event_id` from the Last-Event-ID header when the route's request has such
 * a field and the query does not set it: an EventSource reconnects with the header and cannot
 * change its URL, while a client that can prefers the query (which wins). Validated as the query
 * parameter would be.
 */
function withLastEventId(route: Route, req: Request): Record<string, unknown> {
  const query = req.query as Record<string, unknown>;
  const header = req.get('last-event-id');
  if (
    header === undefined ||
    !route.requestType.desc.fields.some((f) => f.name === LAST_EVENT_ID) ||
    query[LAST_EVENT_ID] !== undefined
  )
    return query;
  return { ...query, [LAST_EVENT_ID]: header.trim() };
}

/** A google.api.HttpBody response (AIP-style non-JSON bodies, e.g. an iCalendar feed): its bytes with its content type. */
const HTTP_BODY = 'google.api.HttpBody';

function sendHttpBody(res: Response, route: Route, response: Record<string, unknown>): void {
  const { content_type: type, data } = response as { content_type?: string; data?: Uint8Array };
  res
    .status(route.successStatus)
    .set(httpBodyHeaders(response))
    .type(type || 'application/octet-stream')
    .send(Buffer.from(data ?? new Uint8Array()));
}

/** Server-Sent Events routes hold an event-stream slot, any other stream a body slot. */
function streamKind(route: Route): StreamKind {
  return route.contentTypes.some(isEventStream) ? 'events' : 'body';
}

/** A client that accepted no bytes for the stream's idle timeout: it is disconnected. */
class IdleClient extends Error {
  override name = 'IdleClient';
}

/**
 * A stream of google.api.HttpBody (a feed, an export) piped to the response as its chunks come, at
 * the pace the client reads and at most its tenant's pace (`pace`, StreamPace): the next chunk is
 * asked for once the last one is written, and a
 * client whose socket accepts nothing for `idleTimeoutMs` (STREAM_IDLE_TIMEOUT_MS) is disconnected,
 * which cancels the call. The first chunk's content type is the response's. A failure before the
 * first chunk is thrown, so the client gets the usual JSON error; after it the status has gone
 * out, so the response is ended without its last chunk: the client sees a truncated transfer,
 * never a 200 with a silently short body. A client that goes away cancels the call. A stream that
 * ends without a chunk is a 204 (no content; an EventSource does not reconnect after one).
 *
 * Server-Sent Events (`text/event-stream`) are sent as they come, never held by a cache or a proxy
 * (`Cache-Control: no-store`, `X-Accel-Buffering: no`; the gateway compresses nothing). Their
 * chunks are whole events, so a failure after the first one ends the response cleanly with a
 * comment: the client's EventSource reconnects with Last-Event-ID and resumes where it was. While
 * one runs, `watch` (stream-watch.ts) may refuse its credential: the stream then ends with an
 * `event: error` whose data is the API's error body (its reason and message).
 */
async function streamHttpBody(
  res: Response,
  route: Route,
  logger: Logger,
  idleTimeoutMs: number,
  /** Waits until the stream's tenant may send this many more bytes (StreamPace). */
  pace: ((bytes: number, signal: AbortSignal) => Promise<void>) | undefined,
  open: (signal: AbortSignal) => AsyncIterable<Record<string, unknown>>,
  watch: ((end: (refusal: unknown) => void) => () => void) | undefined,
): Promise<void> {
  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished)
      gone.abort(new DomainError(grpc.status.CANCELLED, 'CANCELLED', 'the client closed the connection'));
  };
  res.on('close', onClose);
  let refused: { error: unknown } | undefined;
  const unwatch = watch?.((error) => {
    if (refused || gone.signal.aborted) return;
    refused = { error };
    gone.abort(error);
  });
  let started = false;
  let events = false;
  try {
    for await (const chunk of open(gone.signal)) {
      const { content_type: type, data } = chunk as { content_type?: string; data?: Uint8Array };
      if (!started) {
        res
          .status(route.successStatus)
          .set(httpBodyHeaders(chunk))
          .type(type || 'application/octet-stream');
        events = isEventStream(type);
        if (events) {
          res.set({ 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
          res.flushHeaders();
        } else if (isCalendar(type)) {
          // Calendar apps poll a feed: a private cache may keep it for a few minutes.
          res.set('Cache-Control', 'private, max-age=300');
        }
        started = true;
      }
      if (!data?.length) continue;
      await pace?.(data.length, gone.signal);
      if (!res.write(data)) await drained(res, idleTimeoutMs, gone.signal);
    }
    if (!started) res.status(204);
    res.end();
  } catch (err) {
    if (refused) {
      if (!started) throw refused.error;
      if (events) return void res.end(sseError(refused.error, res.locals.requestId as string));
      return void res.destroy();
    }
    if (err instanceof IdleClient) {
      logger.info(
        { request_id: res.locals.requestId, route: route.template, idle_ms: idleTimeoutMs },
        'a streaming client accepted no bytes for the idle timeout; it was disconnected',
      );
      return void res.destroy();
    }
    if (!started) throw err;
    if (!gone.signal.aborted)
      logger[events ? 'warn' : 'error'](
        {
          request_id: res.locals.requestId,
          route: route.template,
          cause: String((err as Error).message).slice(0, 500),
        },
        events
          ? 'an event stream failed after its first event; it was ended for the client to reconnect with Last-Event-ID'
          : 'a streamed response failed after its first chunk; the client sees it cut short',
      );
    if (events && !gone.signal.aborted) res.end(': the stream was interrupted; reconnect with Last-Event-ID\n\n');
    else res.destroy();
  } finally {
    unwatch?.();
    res.off('close', onClose);
  }
}

/** Resolves once the response's socket takes bytes again; throws IdleClient after `idleMs` without. */
async function drained(res: Response, idleMs: number, signal: AbortSignal): Promise<void> {
  const idle = new AbortController();
  const both = AbortSignal.any([signal, idle.signal]);
  try {
    await Promise.race([
      once(res, 'drain', { signal: both }),
      sleep(idleMs, undefined, { signal: both, ref: false }).then(() => {
        throw new IdleClient(`no bytes accepted for ${idleMs} ms`);
      }),
    ]);
  } finally {
    idle.abort();
  }
}

/** The last message of an event stream whose credential was refused: the API's error body as an `error` event. */
function sseError(err: unknown, requestId: string): string {
  return `event: error\ndata: ${JSON.stringify(toHttpError(err, requestId).body)}\n\n`;
}

const isCalendar = (type: string | undefined) => /^text\/calendar\s*(;|$)/i.test(type ?? '');
const isEventStream = (type: string | undefined) => /^text\/event-stream\s*(;|$)/i.test(type ?? '');

/** Statuses that say "try again" (or that the outcome is unknown): never stored for an Idempotency-Key. */
const RETRYABLE = new Set([
  'UNAVAILABLE',
  'DEADLINE_EXCEEDED',
  'CANCELLED',
  'ABORTED',
  'RESOURCE_EXHAUSTED',
  'INTERNAL',
  'UNKNOWN',
  'DATA_LOSS',
]);

/**
 * A failure a retry must get again rather than redo: a client error the service answered. Invalid
 * input (INVALID_ARGUMENT: a field's rule, which the service checks, or a value it refused) is not
 * kept either: nothing was done, so the corrected request may come with the same key, as after a
 * 400 the gateway gave for the request's shape (docs/api.md §8).
 */
function isDefinite(failure: HttpError): boolean {
  const status = (failure.body as { error?: { status?: string } }).error?.status ?? 'UNKNOWN';
  return failure.status < 500 && status !== 'INVALID_ARGUMENT' && !RETRYABLE.has(status);
}

/** A route's success response: status from the proto (201, 204, 302, 200) and its JSON body. */
function render(route: Route, json: Record<string, unknown>): StoredResponse {
  if (route.successStatus === 302) return { status: 302, body: null, headers: { Location: String(json.location) } };
  if (route.successStatus === 204) return { status: 204, body: null, headers: {} };
  return { status: route.successStatus, body: route.responseBody ? json[route.responseBody] : json, headers: {} };
}

function send(res: Response, out: StoredResponse, extraHeaders: Record<string, string> = {}): void {
  res.status(out.status).set({ ...out.headers, ...extraHeaders });
  if (out.body === null) res.end();
  else sendJson(res, out.body);
}

/**
 * The bytes and headers Express's res.json writes (the gateway sets no json spaces, replacer or
 * escape, and no ETag), without its content-type lookups and freshness check where neither can
 * change them: a 200 or 201 with a body, to a request that is not HEAD and sends no conditional header.
 */
function sendJson(res: Response, body: unknown): void {
  const text = JSON.stringify(body) as string | undefined;
  const { method, headers } = res.req;
  if (
    text === undefined ||
    (res.statusCode !== 200 && res.statusCode !== 201) ||
    method === 'HEAD' ||
    headers['if-none-match'] !== undefined ||
    headers['if-modified-since'] !== undefined ||
    res.getHeader('content-type') !== undefined
  ) {
    res.json(body);
    return;
  }
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** A Host (or X-Forwarded-Host) value fit for a URL: a name or an address, and a port. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The origin of this request's absolute URLs: the configured one, or the request's scheme and Host. */
function publicBaseUrlOf(req: Request, configured: string | undefined): string {
  if (configured) return configured;
  const host = req.host;
  const scheme = req.protocol;
  if (!host || host.length > 255 || !HOST.test(host) || (scheme !== 'http' && scheme !== 'https'))
    throw gatewayErrors.badRequest(
      [{ field: 'Host', description: 'is missing or not a host name (or the forwarded scheme is not http or https)' }],
      'the request has no usable Host header to build an absolute URL from: send one, or ask the operator to set PUBLIC_BASE_URL',
    );
  return `${scheme}://${host.toLowerCase()}`;
}
