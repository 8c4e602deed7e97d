import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { rateLimit, ipKeyGenerator } from 'express-rate-limit';
import * as grpc from '@grpc/grpc-js';
import { Downstream, MetadataKeys } from '@workauto/grpc';
import type { Logger } from '@workauto/logger';
import { ActorType } from '@workauto/protos/workauto/identity/v1/identity.js';
import { Authenticator, bearerToken, tokenKey } from './auth.js';
import { GatewayError, gatewayErrors, toHttpError } from './errors.js';
import { messageToJson } from './json-mapping.js';
import { buildOpenApi } from './openapi.js';
import { loadRoutes, matchRoute, type Route } from './routes.js';
import { buildRequest } from './transcode.js';

export interface GatewayOptions {
  logger: Logger;
  /** Downstream key (proto package segment: identity, notes_tasks, …) → host:port. */
  downstreams: Record<string, string>;
  /** How long a resolved API key is cached (default 1000 ms). */
  authCacheTtlMs?: number;
  rateLimitPerMinute?: number;
  deadlineMs?: number;
}

export interface Gateway {
  app: express.Express;
  routes: Route[];
  listen(host: string, port: number): Promise<number>;
  close(): Promise<void>;
}

const ACTOR_TYPES: Record<number, string> = {
  [ActorType.ACTOR_TYPE_MEMBER]: 'member', [ActorType.ACTOR_TYPE_API_KEY]: 'api_key',
  [ActorType.ACTOR_TYPE_PLATFORM_ADMIN]: 'platform_admin', [ActorType.ACTOR_TYPE_SYSTEM]: 'system',
};
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { logger } = options;
  const routes = loadRoutes();
  const downstreams = new Map(Object.entries(options.downstreams).map(([name, addr]) => [name, new Downstream(name, addr, { deadlineMs: options.deadlineMs ?? 5_000 })]));
  const auth = new Authenticator(() => downstreams.get('identity'), options.authCacheTtlMs ?? 1_000);
  const openapi = buildOpenApi(routes);
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback, linklocal, uniquelocal');

  // Request id on every response, and one access-log line per request (never headers or bodies).
  app.use((req, res, next) => {
    const given = req.get('x-request-id');
    const id = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader('X-Request-Id', id);
    const started = performance.now();
    res.on('finish', () => {
      logger.info({ request_id: id, method: req.method, route: res.locals.route ?? req.path.slice(0, 200), status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request');
    });
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const results = await Promise.all([...downstreams].map(async ([name, d]) => [name, await d.isServing()] as const));
    const down = results.filter(([, ok]) => !ok).map(([name]) => name);
    res.status(down.length ? 503 : 200).json({ status: down.length ? 'unavailable' : 'ready', not_ready: down });
  });
  app.get('/api/v1/openapi.json', (_req, res) => {
    res.json(openapi);
  });

  app.use(
    '/api',
    rateLimit({
      windowMs: 60_000,
      limit: options.rateLimitPerMinute ?? 600,
      standardHeaders: 'draft-8',
      legacyHeaders: false,
      // Per credential (its hash: the token itself is never kept), else per client address.
      keyGenerator: (req) => {
        const token = bearerToken(req.get('authorization'));
        return token ? `t:${tokenKey(token)}` : `ip:${ipKeyGenerator(req.ip ?? '')}`;
      },
      handler: (req, res, _next, opts) => {
        const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
        const retryAfter = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + opts.windowMs) - Date.now()) / 1000));
        const err = new GatewayError(grpc.status.RESOURCE_EXHAUSTED, 'RATE_LIMITED', `too many requests for this credential; retry after ${retryAfter} s`, undefined, {
          headers: { 'Retry-After': String(retryAfter) },
        });
        send(res, err);
      },
    }),
  );

  // JSON bodies only (415 otherwise), at most 1 MiB (413).
  app.use('/api', (req, _res, next) => {
    const hasBody = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
    if (hasBody && !req.is(['application/json', 'application/*+json'])) {
      return next(new GatewayError(grpc.status.INVALID_ARGUMENT, 'UNSUPPORTED_MEDIA_TYPE', 'send the body as JSON with Content-Type: application/json', 415));
    }
    next();
  });
  app.use('/api', express.json({ limit: '1mb', strict: false, type: ['application/json', 'application/*+json'] }));

  app.use('/api', async (req, res) => {
    let path: string;
    try {
      path = decodeURI(req.path);
    } catch {
      throw gatewayErrors.badRequest([{ field: '(path)', description: 'is not valid percent-encoding' }]);
    }
    const match = matchRoute(routes, req.method, `/api${req.path}`);
    if (!match) throw gatewayErrors.routeNotFound(req.method, `/api${path}`);
    if ('methodNotAllowed' in match) throw gatewayErrors.methodNotAllowed(req.method, match.methodNotAllowed);
    const { route, params } = match;
    res.locals.route = route.template;
    const downstream = downstreams.get(route.downstream);
    if (!downstream) throw gatewayErrors.unavailable(`the ${route.downstream} service is not configured in this gateway`);

    const metadata = new grpc.Metadata();
    metadata.set(MetadataKeys.requestId, res.locals.requestId as string);
    if (req.ip) metadata.set(MetadataKeys.clientIp, req.ip);
    const ua = req.get('user-agent');
    if (ua) metadata.set(MetadataKeys.userAgent, ua.slice(0, 512));
    const principal = await auth.authorize(route, req.get('authorization'), metadata);
    if (principal) {
      if (principal.tenant_id) metadata.set(MetadataKeys.tenantId, principal.tenant_id);
      metadata.set(MetadataKeys.actorType, ACTOR_TYPES[principal.actor_type] ?? 'system');
      metadata.set(MetadataKeys.actorId, principal.actor_id);
      if (principal.member_id) metadata.set(MetadataKeys.memberId, principal.member_id);
    }

    const request = buildRequest(route, params, req.query as Record<string, unknown>, req.body);
    const response = await downstream.call(
      {
        path: route.grpcPath,
        requestSerialize: (o: Record<string, unknown>) => Buffer.from(route.requestType.encode(route.requestType.fromObject(o)).finish()),
        responseDeserialize: (b: Buffer) => route.responseType.decode(b) as unknown as Record<string, unknown>,
      },
      request,
      { metadata },
    );
    // Identity changes (deactivation, revocation, roles) take effect at once on this replica.
    if (route.downstream === 'identity' && req.method !== 'GET') auth.clear();

    const json = messageToJson(route.responseType, response) as Record<string, unknown>;
    if (route.successStatus === 302) return void res.redirect(302, String(json.location));
    if (route.successStatus === 204) return void res.status(204).end();
    res.status(route.successStatus).json(route.responseBody ? json[route.responseBody] : json);
  });

  app.use((req: Request, _res: Response, next: NextFunction) => next(gatewayErrors.routeNotFound(req.method, req.path)));
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const e = err as { type?: string; status?: number };
    if (e?.type === 'entity.too.large') err = new GatewayError(grpc.status.INVALID_ARGUMENT, 'BODY_TOO_LARGE', 'the request body is over 1 MiB; send less data per request', 413);
    else if (e?.type === 'entity.parse.failed') err = gatewayErrors.badRequest([{ field: '(body)', description: 'is not valid JSON' }], 'the request body is not valid JSON');
    else if (e?.type === 'charset.unsupported' || e?.type === 'encoding.unsupported') {
      err = new GatewayError(grpc.status.INVALID_ARGUMENT, 'UNSUPPORTED_MEDIA_TYPE', 'send the body as UTF-8 JSON', 415);
    }
    const http = toHttpError(err, res.locals.requestId as string);
    if (http.status >= 500) logger.error({ err, request_id: res.locals.requestId }, 'request failed');
    send(res, err);
  });

  function send(res: Response, err: unknown): void {
    const http = toHttpError(err, res.locals.requestId as string);
    for (const [k, v] of Object.entries(http.headers)) res.setHeader(k, v);
    res.status(http.status).json(http.body);
  }

  let server: Server | undefined;
  return {
    app,
    routes,
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server = app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve((server!.address() as { port: number }).port)));
      });
    },
    async close() {
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      server?.closeAllConnections?.();
      for (const d of downstreams.values()) d.close();
    },
  };
}
