/**
 * The one handler behind every annotated route: match → downstream → authenticate and authorize
 * → request message → gRPC call → JSON response. Nothing here knows any endpoint.
 */
import type { Request, Response } from 'express';
import * as grpc from '@grpc/grpc-js';
import { MetadataKeys, type Downstream } from '@workauto/grpc';
import { ActorType, type Principal } from '@workauto/protos/workauto/identity/v1/identity.js';
import { bearerToken, tokenKey, type Authenticator } from './auth.js';
import { gatewayErrors, toHttpError } from './errors.js';
import { IDEMPOTENCY_HEADER, IdempotencyStore, type StoredResponse } from './idempotency.js';
import { messageToJson } from '@workauto/protos';
import { matchRoute, type Route } from './routes.js';
import { buildRequest } from './transcode.js';

const ACTOR_TYPES: Record<number, string> = {
  [ActorType.ACTOR_TYPE_MEMBER]: 'member',
  [ActorType.ACTOR_TYPE_API_KEY]: 'api_key',
  [ActorType.ACTOR_TYPE_PLATFORM_ADMIN]: 'platform_admin',
  [ActorType.ACTOR_TYPE_SYSTEM]: 'system',
};

/** The service whose mutations can change who a token acts for (deactivation, revocation, roles). */
const IDENTITY = 'identity';

/** What every downstream call carries: the request id, the client, and (when authenticated) the principal. */
function callMetadata(req: Request, requestId: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set(MetadataKeys.requestId, requestId);
  if (req.ip) metadata.set(MetadataKeys.clientIp, req.ip);
  const ua = req.get('user-agent');
  if (ua) metadata.set(MetadataKeys.userAgent, ua.slice(0, 512));
  return metadata;
}

function addPrincipal(metadata: grpc.Metadata, principal: Principal): void {
  if (principal.tenant_id) metadata.set(MetadataKeys.tenantId, principal.tenant_id);
  metadata.set(MetadataKeys.actorType, ACTOR_TYPES[principal.actor_type] ?? 'system');
  metadata.set(MetadataKeys.actorId, principal.actor_id);
  if (principal.member_id) metadata.set(MetadataKeys.memberId, principal.member_id);
}

/** protobufjs (de)serialisers of a route's messages, in the shape Downstream.call takes. */
function unaryMethod(route: Route) {
  return {
    path: route.grpcPath,
    requestSerialize: (o: Record<string, unknown>) => Buffer.from(route.requestType.encode(route.requestType.fromObject(o)).finish()),
    responseDeserialize: (b: Buffer) => route.responseType.decode(b) as unknown as Record<string, unknown>,
  };
}

export function transcodingHandler(routes: Route[], downstreams: Map<string, Downstream>, auth: Authenticator, idempotency: IdempotencyStore) {
  const methods = new Map(routes.map((r) => [r, unaryMethod(r)]));
  return async (req: Request, res: Response): Promise<void> => {
    // originalUrl keeps the percent-encoding, so an encoded '/' inside a variable stays inside it.
    const path = req.originalUrl.split('?')[0] ?? '';
    const match = matchRoute(routes, req.method, path);
    if (!match) throw gatewayErrors.routeNotFound(req.method, path.slice(0, 200));
    if ('methodNotAllowed' in match) throw gatewayErrors.methodNotAllowed(req.method, match.methodNotAllowed);
    if ('badPath' in match) throw gatewayErrors.badRequest([{ field: match.badPath, description: 'is not valid percent-encoding' }]);
    const { route, params } = match;
    res.locals.route = route.template;
    const metadata = callMetadata(req, res.locals.requestId as string);
    // Authentication before validation: a caller without a credential learns nothing about the API's input rules.
    const principal = await auth.authorize(route, req.get('authorization'), metadata);
    if (principal) addPrincipal(metadata, principal);

    const request = buildRequest(route, params, req.query as Record<string, unknown>, req.body);
    // Client errors first: a missing service is only reported for a request that would have reached it.
    const downstream = downstreams.get(route.downstream);
    if (!downstream) throw gatewayErrors.unavailable(`the ${route.downstream} service is not configured in this gateway`);

    const idempotencyKey = req.method === 'POST' ? IdempotencyStore.parseKey(req.get(IDEMPOTENCY_HEADER)) : undefined;
    const token = principal ? bearerToken(req.get('authorization')) : undefined;
    const scope = token ? tokenKey(token) : 'anonymous';
    if (idempotencyKey) {
      const begun = await idempotency.begin(scope, idempotencyKey, IdempotencyStore.fingerprint(`${req.method} ${route.template}`, request));
      if (begun.kind === 'replay') return send(res, begun.response, { 'Idempotent-Replayed': 'true' });
    }

    let out: StoredResponse;
    try {
      const response = await downstream.call(methods.get(route)!, request, { metadata });
      out = render(route, messageToJson(route.responseType, response) as Record<string, unknown>);
    } catch (err) {
      if (idempotencyKey) {
        const failure = toHttpError(err, res.locals.requestId as string);
        // 503: the service was not reached (down, circuit open), so no work was done and a retry may do it.
        if (failure.status === 503) await idempotency.release(scope, idempotencyKey);
        else await idempotency.complete(scope, idempotencyKey, failure);
      }
      throw err;
    } finally {
      if (route.downstream === IDENTITY && req.method !== 'GET') auth.clear(); // so this replica sees the change at once
    }
    if (idempotencyKey) await idempotency.complete(scope, idempotencyKey, out);
    send(res, out);
  };
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
  else res.json(out.body);
}
