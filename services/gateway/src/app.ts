/**
 * The gateway's composition: the route table from the protos, one Downstream per configured
 * service, and the Express pipeline every request goes through (request id → health/OpenAPI →
 * rate limit → JSON body → transcoding handler → the error shape of docs/api.md §5).
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import * as grpc from '@grpc/grpc-js';
import { fileURLToPath } from 'node:url';
import { Keyring } from '@workauto/crypto';
import { createPool, runMigrations } from '@workauto/db';
import { untilDatabaseAnswers } from '@workauto/service';
import { CallerSigner, Downstream, callerAudience, type DownstreamOptions } from '@workauto/grpc';
import { IdentityServiceService } from '@workauto/protos/workauto/identity/v1/identity.js';
import type { Logger } from '@workauto/logger';
import { Authenticator } from './auth.js';
import { GatewayError, gatewayErrors, toHttpError } from './errors.js';
import { bodyLimits } from './body-limits.js';
import { inOneLayer } from './one-layer.js';
import { jsonSyntaxDescription } from './json-syntax.js';
import { corsHeaders, corsPreflight } from './cors.js';
import { DOCS_PATH, docsRoutes } from './docs.js';
import { healthRoutes } from './health.js';
import { IdempotencyStore } from './idempotency.js';
import { buildOpenApi } from './openapi.js';
import { mcpEndpoint } from './mcp.js';
import { transcodingHandler } from './proxy.js';
import { failedAuthLimiter, rateLimiter } from './rate-limit.js';
import { TenantLimits } from './tenant-limits.js';
import { StreamPace, StreamSlots } from './stream-slots.js';
import { StreamWatch } from './stream-watch.js';
import { TokenTenants } from './token-tenants.js';
import { SharedRateCounter } from './shared-counter.js';
import { loadRoutes, matchRoute, type RouteInfo } from './routes.js';

export interface GatewayOptions {
  logger: Logger;
  /** The gateway's own database: Idempotency-Key records. */
  databaseUrl: string;
  /** ENCRYPTION_KEYS: stored responses are encrypted (they may hold a one-time secret). */
  encryptionKeys: string;
  /** Downstream key (proto package segment: identity, notes_tasks, …) → host:port. */
  downstreams: Record<string, string>;
  /** How long a resolved token is trusted without asking identity again (default 1000 ms). */
  authCacheTtlMs?: number;
  /** Requests per minute per credential, or per client address without one; also the 401s per address (default 600). */
  rateLimitPerMinute?: number;
  /** Deadline of each downstream call (default 5000 ms). */
  deadlineMs?: number;
  /** CALLER_SIGNING_KEY: private JWK that signs each downstream call's caller identity (services verify it). */
  callerSigningKey: string;
  /**
   * CIDRs (or addresses) of the proxies in front of the gateway (TRUSTED_PROXIES): X-Forwarded-For
   * is believed only from a peer inside them. Default none: the client address is the TCP peer.
   */
  trustedProxies?: string[];
  /** Downstream circuit tuning (tests use short timings). */
  downstreamOptions?: Omit<DownstreamOptions, 'deadlineMs'>;
  /** STARTUP_TIMEOUT_MS: how long the start waits for its database (default 5 minutes), then fails naming it. */
  startupTimeoutMs?: number;
  /** GATEWAY_TENANT_CONCURRENCY: one tenant's requests in flight at once (default 128). */
  tenantConcurrency?: number;
  /** RATE_LIMIT_PER_TENANT_PER_MINUTE: one tenant's requests per minute, all its credentials together (default 10 × rateLimitPerMinute). */
  tenantRateLimitPerMinute?: number;
  /** CORS_ALLOWED_ORIGINS: origins whose browser pages may call the API (default none: no CORS headers). */
  corsAllowedOrigins?: string[];
  /** PUBLIC_BASE_URL: the origin of absolute URLs in responses (a feed_url); default each request's scheme and Host. */
  publicBaseUrl?: string;
  /** GATEWAY_TENANT_STREAMS: one tenant's streamed responses (exports, feeds) open at once (default 8). */
  tenantStreams?: number;
  /** GATEWAY_TENANT_EVENT_STREAMS: one tenant's Server-Sent Events streams open at once (default 32). */
  tenantEventStreams?: number;
  /** STREAM_IDLE_TIMEOUT_MS: a streaming client that accepts no bytes for this long is disconnected (default 30 s). */
  streamIdleTimeoutMs?: number;
  /** How often open streams' credentials are checked again (default 2 s; tests shorten it). */
  streamReauthorizeMs?: number;
  /**
   * HTTP_KEEP_ALIVE_TIMEOUT_MS: how long an idle client connection stays open (default 65 s, above
   * load balancers' 60 s, so the balancer closes it first and never reuses one the gateway closed).
   */
  keepAliveTimeoutMs?: number;
}

export interface Gateway {
  app: express.Express;
  routes: RouteInfo[];
  /** Starts serving; resolves to the bound port (useful with port 0). */
  listen(host: string, port: number): Promise<number>;
  /** Stops accepting, ends open connections, closes the downstream channels. */
  close(): Promise<void>;
}

/** A client's request id is echoed only if it is short and plain (it ends up in logs and metadata). */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const MAX_BODY = '1mb';
const JSON_TYPES = ['application/json', 'application/*+json'];
const OPENAPI_PATH = '/api/v1/openapi.json';
const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 65_000;

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { logger } = options;
  const callerSigner = new CallerSigner(options.callerSigningKey, { issuer: 'gateway' });
  const routes = await loadRoutes();
  const deadlineMs = options.deadlineMs ?? 5_000;
  const downstreams = new Map(
    Object.entries(options.downstreams).map(([name, addr]) => [
      name,
      new Downstream(name, addr, { ...options.downstreamOptions, deadlineMs }),
    ]),
  );
  const limitPerMinute = options.rateLimitPerMinute ?? 600;
  const keyring = Keyring.fromEnv(options.encryptionKeys);
  const pool = createPool(options.databaseUrl, { applicationName: 'gateway' });
  // Every rate limit counts here, shared by the gateway replicas through this database.
  const counter = new SharedRateCounter(pool, logger);
  const tenantLimits = new TenantLimits(
    {
      concurrency: options.tenantConcurrency ?? 128,
      perMinute: options.tenantRateLimitPerMinute ?? 10 * limitPerMinute,
    },
    counter,
  );
  const auth = new Authenticator(
    () => downstreams.get('identity'),
    options.authCacheTtlMs ?? 1_000,
    tenantLimits,
    Math.round(deadlineMs * 0.6),
    {
      metadata: () =>
        callerSigner.metadata(
          { requestId: randomUUID() },
          callerAudience(IdentityServiceService.getRevocationEpoch.path),
        ),
      logger,
    },
  );
  try {
    // Its Idempotency-Key database may come up after it (a cluster starting, an outage): wait, don't exit.
    await untilDatabaseAnswers(options.databaseUrl, logger, () => runMigrations(pool, [MIGRATIONS]), {
      timeoutMs: options.startupTimeoutMs ?? 5 * 60_000,
    });
  } catch (err) {
    for (const d of downstreams.values()) d.close();
    await pool.end();
    throw err;
  }
  counter.startSweeping();
  const idempotency = new IdempotencyStore(pool, keyring, logger);
  idempotency.startSweeping();
  const openapi = buildOpenApi(routes);
  const checkBody = bodyLimits();

  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  // req.ip is the TCP peer unless that peer is a configured proxy (then X-Forwarded-For's entry
  // added by the nearest untrusted hop): any other caller could forge the audit log's ip_address
  // and dodge the per-address limits with a header.
  const trustedProxies = options.trustedProxies ?? [];
  app.set('trust proxy', trustedProxies.length ? trustedProxies : false);

  // Request id on every response, and one access-log line per request (never headers or bodies).
  const requestId: express.RequestHandler = (req, res, next) => {
    const given = req.get('x-request-id');
    const id = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader('X-Request-Id', id);
    // Every answer is for its caller only, and is what its Content-Type says: no cache keeps it
    // (a route may allow a private one: the calendar feed), no browser sniffs it into HTML.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-store');
    const started = performance.now();
    res.on('finish', () => {
      const route = (res.locals.route as string | undefined) ?? (req.originalUrl.split('?')[0] ?? '').slice(0, 200);
      logger.info(
        {
          request_id: id,
          method: req.method,
          route,
          status: res.statusCode,
          ms: Math.round(performance.now() - started),
        },
        'request',
      );
    });
    next();
  };

  let serving = true;
  const pages = express.Router();
  pages.use(healthRoutes(downstreams, () => serving));
  pages.get(OPENAPI_PATH, (_req, res) => {
    res.json(openapi);
  });
  pages.use(docsRoutes());
  app.use(
    inOneLayer(
      requestId,
      corsHeaders(options.corsAllowedOrigins ?? []),
      // An API call never matches the health, OpenAPI and docs routes: it skips their matching.
      (req, res, next) => (isApiCall(req.path) ? next() : pages(req, res, next)),
    ),
  );

  const streamWatch = new StreamWatch(auth, logger, options.streamReauthorizeMs);
  const transcode = transcodingHandler(
    routes,
    downstreams,
    auth,
    idempotency,
    callerSigner,
    logger,
    options.publicBaseUrl,
    {
      slots: new StreamSlots({ body: options.tenantStreams ?? 8, events: options.tenantEventStreams ?? 32 }),
      pace: new StreamPace(),
      watch: streamWatch,
      tokenTenants: new TokenTenants(callerSigner),
      idleTimeoutMs: options.streamIdleTimeoutMs ?? 30_000,
    },
  );
  const parseJson = express.json({ limit: MAX_BODY, strict: false, type: JSON_TYPES });
  // One Express layer for the whole /api chain: Express makes each handler given to app.use a layer of
  // its own, and each layer matches the mount path and rewrites req.url again, on every request.
  app.use(
    '/api',
    inOneLayer(
      failedAuthLimiter(limitPerMinute, send, counter),
      rateLimiter(limitPerMinute, send, counter),
      corsPreflight(options.corsAllowedOrigins ?? [], routes),
      // JSON bodies only (415 otherwise), at most 1 MiB (413), within the shape limits (400).
      (req, res, next) => {
        // Without a body the three steps do nothing but set req.body = undefined: a GET skips them.
        if (!hasBody(req)) {
          if (!('body' in (req as object))) req.body = undefined;
          return next();
        }
        // The method first: a path without it is a 405 whatever its body (docs/api.md §5).
        const match = matchRoute(routes, req.method, req.originalUrl.split('?')[0] ?? '');
        if (match && 'methodNotAllowed' in match)
          return next(gatewayErrors.methodNotAllowed(req.method, match.methodNotAllowed));
        const declared = Number(req.get('content-length') ?? 0) > 0 || req.get('transfer-encoding') !== undefined;
        if (declared && !req.is(JSON_TYPES)) {
          return next(
            new GatewayError(
              grpc.status.INVALID_ARGUMENT,
              'UNSUPPORTED_MEDIA_TYPE',
              'send the body as JSON with Content-Type: application/json',
              415,
            ),
          );
        }
        parseJson(req, res, (err?: unknown) => (err ? next(err) : checkBody(req, res, next)));
      },
      mcpEndpoint(downstreams, auth, callerSigner),
      async (req: Request, res: Response) => {
        try {
          await transcode(req, res);
        } finally {
          auth.finished(req);
        }
      },
    ),
  );

  app.use((req: Request, _res: Response, next: NextFunction) =>
    next(gatewayErrors.routeNotFound(req.method, (req.originalUrl.split('?')[0] ?? '').slice(0, 200))),
  );
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => send(res, fromBodyParser(err)));

  function send(res: Response, err: unknown): void {
    const http = toHttpError(err, res.locals.requestId as string);
    if (http.status >= 500)
      logger[http.status === 500 ? 'error' : 'warn'](
        { request_id: res.locals.requestId, status: http.status, cause: describe(err) },
        'request failed',
      );
    for (const [k, v] of Object.entries(http.headers)) res.setHeader(k, v);
    res.status(http.status).json(http.body);
  }

  let server: Server | undefined;
  return {
    app,
    routes,
    listen(host, port) {
      return new Promise((resolve, reject) => {
        const s = app.listen(port, host, (err?: Error) =>
          err ? reject(err) : resolve((s.address() as { port: number }).port),
        );
        s.keepAliveTimeout = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
        // Above the idle timeout: a connection waiting for its next request's headers is idle, not slow.
        s.headersTimeout = s.keepAliveTimeout + 1_000;
        server = s;
      });
    },
    async close() {
      serving = false;
      const s = server;
      if (s) {
        const closed = new Promise<void>((resolve) => s.close(() => resolve()));
        s.closeIdleConnections();
        // A request in flight may wait up to the downstream deadline for its service: it gets that
        // and a second more to be answered, then remaining sockets are ended. (terminationGracePeriodSeconds
        // must cover the preStop sleep plus this.)
        const force = setTimeout(() => s.closeAllConnections(), deadlineMs + 1_000);
        // A keep-alive connection turns idle once its last response is written: end it then, so the
        // process exits as soon as the requests in flight are answered.
        const idle = setInterval(() => s.closeIdleConnections(), 100);
        await closed;
        clearTimeout(force);
        clearInterval(idle);
      }
      streamWatch.stop();
      await auth.stop();
      for (const d of downstreams.values()) d.close();
      idempotency.stop();
      counter.stop();
      await pool.end();
    },
  };
}

/** Under /api/ and neither the OpenAPI document nor the docs page (Express matches paths regardless of case). */
function isApiCall(path: string): boolean {
  const p = path.toLowerCase();
  return p.startsWith('/api/') && !p.startsWith(OPENAPI_PATH) && !p.startsWith(DOCS_PATH);
}

/** type-is's hasBody, the test body-parser skips a request by (an empty Content-Length still has a body: {}). */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length']));
}

/** body-parser's failures as the API's errors (docs/api.md §5). */
function fromBodyParser(err: unknown): unknown {
  const type = (err as { type?: string } | null)?.type;
  if (type === 'entity.too.large')
    return new GatewayError(
      grpc.status.INVALID_ARGUMENT,
      'BODY_TOO_LARGE',
      'the request body is over 1 MiB; send less data per request',
      413,
    );
  if (type === 'entity.parse.failed') {
    const { body, message } = err as { body?: unknown; message: string };
    const where = typeof body === 'string' ? jsonSyntaxDescription(body, message) : undefined;
    return gatewayErrors.badRequest(
      [{ field: '(body)', description: where ? `is not valid JSON: ${where}` : 'is not valid JSON' }],
      where
        ? `the request body is not valid JSON: ${where}; fix it there and send it again`
        : 'the request body is not valid JSON',
    );
  }
  if (type === 'charset.unsupported' || type === 'encoding.unsupported') {
    return new GatewayError(
      grpc.status.INVALID_ARGUMENT,
      'UNSUPPORTED_MEDIA_TYPE',
      'send the body as UTF-8 JSON without Content-Encoding',
      415,
    );
  }
  if (isDecompressionError(err)) {
    // Content-Encoding says gzip/deflate/br but the bytes are not (docs/api.md §4: a 400).
    return gatewayErrors.badRequest(
      [{ field: '(body)', description: 'does not match its Content-Encoding' }],
      'the request body is not encoded as its Content-Encoding says; send it compressed that way, or drop the header',
    );
  }
  if (type === 'request.aborted' || type === 'request.size.invalid')
    return gatewayErrors.badRequest([{ field: '(body)', description: 'was not received completely' }]);
  return err;
}

/** zlib's failure to inflate a body (body-parser passes it on with status 400 and the zlib errno). */
function isDecompressionError(err: unknown): boolean {
  const e = err as { status?: unknown; errno?: unknown; type?: unknown } | null;
  return e?.status === 400 && e.type === undefined && typeof e.errno === 'number';
}

/** What a 5xx is logged with: status and message, never the error object (it holds call metadata). */
function describe(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { value: String(err).slice(0, 200) };
  const e = err as Error & { code?: unknown; reason?: unknown };
  if (typeof e.code === 'number') {
    // A gRPC status (from a downstream or raised here): its code says what happened.
    return {
      grpc_status: grpc.status[e.code] ?? e.code,
      ...(typeof e.reason === 'string' ? { reason: e.reason } : {}),
      message: e.message.slice(0, 500),
    };
  }
  // Anything else is a bug in the gateway: the stack is for the logs only, never the response.
  return { name: e.name, message: e.message.slice(0, 500), stack: e.stack?.split('\n').slice(0, 8).join('\n') };
}
