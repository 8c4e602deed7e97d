/**
 * The one egress policy for outbound calls to URLs that tenants supply (docs/operations.md, "Outbound
 * calls"): checked when the URL is written (checkUrl) and again on every connection, on the
 * addresses actually dialled (fetch, request), so DNS rebinding cannot slip past the first check.
 */
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import net from 'node:net';
import tls from 'node:tls';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { loadConfig, z } from '@workauto/config';
import { errors, urlTextProblem } from '@workauto/grpc';
import { Agent, buildConnector, Dispatcher1Wrapper, type Dispatcher } from 'undici';
import { addressRefusal, parseCidrList, type Cidr } from './address.js';
import { proxyConnector, proxySettings, type ProxySettings } from './proxy.js';
import {
  EgressConnectionError,
  EgressError,
  EgressRefusedError,
  EgressResponseTooLargeError,
  EgressTimeoutError,
} from './errors.js';

export const URL_MAX_LENGTH = 2048;

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Every address of a host name, both families (dns.lookup's `all` answer). */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

export interface EgressPolicyOptions {
  /** Any address and plain http may be reached (make dev, a trusted network). Default false. */
  allowPrivate?: boolean;
  /** Ranges reachable even though they are not global unicast, e.g. ['10.20.0.0/16', 'fd00::/8']. */
  allowedCidrs?: readonly string[];
  /** How host names are resolved at connect time; default the system resolver (dns.lookup). */
  resolve?: Resolver;
  /** Longest wait for a TCP/TLS connection (default 5 s). */
  connectTimeoutMs?: number;
  /** Default of EgressRequestInit.timeoutMs (10 s). */
  timeoutMs?: number;
  /** CA certificates trusted for https besides the default ones (an internal CA; tests). */
  extraCaCertificates?: readonly string[];
  /**
   * A forward proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY): calls go through a tunnel to the address
   * the policy checked. Default none (fromEnv reads the environment's).
   */
  proxy?: ProxySettings;
}

export interface EgressRequestInit extends Omit<RequestInit, 'redirect'> {
  /** Time for the whole exchange, the response body included; then EgressTimeoutError. */
  timeoutMs?: number;
  /**
   * The most bytes of response body read: past it the body fails with EgressResponseTooLargeError
   * and the connection is dropped, the rest never read, so memory holds at most this much of it.
   */
  maxResponseBytes?: number;
  /** Told when maxResponseBytes was passed: readers such as the MCP SDK's SSE parser swallow a body's error. */
  onResponseTooLarge?: (err: EgressResponseTooLargeError) => void;
}

/** One request of `EgressPolicy.request`: what the delivery path sends. */
export interface EgressRequestOptions {
  method: string;
  /** Lower-case names. */
  headers?: Record<string, string>;
  body?: string;
  /** Time for the whole exchange, the response body included (default the policy's). */
  timeoutMs?: number;
  /** The caller's abort: its reason is thrown as it is, never as an EgressError. */
  signal?: AbortSignal | undefined;
}

/** The answer of `EgressPolicy.request`. Its body must be discarded (or the connection is held until the timeout). */
export interface EgressResponse {
  status: number;
  /** Lower-case names; a repeated header is an array. */
  headers: Record<string, string | string[] | undefined>;
  /**
   * Reads the body to its end so the connection is reused; past `limitBytes` the connection is
   * dropped instead, the rest never read. Never fails: a body cut off or timed out is discarded too.
   */
  discardBody(limitBytes: number): Promise<void>;
}

const ALLOW_PRIVATE_HINT =
  'only https URLs to public (global unicast) addresses are allowed; to reach private addresses on a self-hosted ' +
  'deployment, the operator sets EGRESS_ALLOW_PRIVATE=true or lists the ranges in EGRESS_ALLOWED_CIDRS';
const RESOLVED_HINT =
  'use a URL whose host has a public address; on a self-hosted deployment, the operator may allow the range with ' +
  'EGRESS_ALLOWED_CIDRS (or EGRESS_ALLOW_PRIVATE=true)';

/** The policy's environment variables (README, docs/operations.md). */
export const egressVars = {
  EGRESS_ALLOW_PRIVATE: z
    .enum(['true', 'false'], { error: 'expected true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  EGRESS_ALLOWED_CIDRS: z
    .string()
    .default('')
    .transform((text, ctx) => {
      const parsed = parseCidrList(text);
      if ('bad' in parsed) {
        ctx.addIssue({
          code: 'custom',
          message: `"${parsed.bad}" is not a CIDR range; expected a comma-separated list like 10.0.0.0/8,fd00::/8`,
        });
        return z.NEVER;
      }
      return text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    }),
};

export class EgressPolicy {
  readonly allowPrivate: boolean;
  readonly #allowed: Cidr[];
  readonly #resolve: Resolver;
  readonly #timeoutMs: number;
  readonly #agent: Agent;
  /** The agent as Node's built-in fetch (undici 7's handler API) takes it. */
  readonly #dispatcher: Dispatcher1Wrapper;

  /**
   * From EGRESS_ALLOW_PRIVATE, EGRESS_ALLOWED_CIDRS and the proxy variables (HTTPS_PROXY, HTTP_PROXY,
   * NO_PROXY, upper or lower case); a bad value is an error naming the variable.
   */
  static fromEnv(
    env: Record<string, string | undefined> = process.env,
    options: Omit<EgressPolicyOptions, 'allowPrivate' | 'allowedCidrs'> = {},
  ): EgressPolicy {
    const config = loadConfig(egressVars, env);
    return new EgressPolicy({
      proxy: proxySettings(env),
      ...options,
      allowPrivate: config.EGRESS_ALLOW_PRIVATE,
      allowedCidrs: config.EGRESS_ALLOWED_CIDRS,
    });
  }

  constructor(options: EgressPolicyOptions = {}) {
    this.allowPrivate = options.allowPrivate ?? false;
    const parsed = parseCidrList((options.allowedCidrs ?? []).join(','));
    if ('bad' in parsed) throw new Error(`allowedCidrs: "${parsed.bad}" is not a CIDR range`);
    this.#allowed = parsed.cidrs;
    this.#resolve = options.resolve ?? ((hostname) => dns.promises.lookup(hostname, { all: true, order: 'verbatim' }));
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    const connect = {
      timeout: options.connectTimeoutMs ?? 5_000,
      // Every host name is resolved through #lookup; IP literals never reach it (net.connect skips the
      // lookup for them), which is why fetch checks the URL's host itself before dispatching.
      lookup: this.#lookup,
      ...(options.extraCaCertificates?.length
        ? { ca: [...tls.getCACertificates('default'), ...options.extraCaCertificates] }
        : {}),
    };
    const proxy = options.proxy;
    this.#agent = new Agent({
      connect:
        proxy?.https || proxy?.http
          ? proxyConnector({
              settings: proxy,
              direct: buildConnector(connect),
              tls: connect,
              timeoutMs: connect.timeout,
              resolve: async (hostname) => {
                const bare = hostname.replace(/^\[|\]$/g, '');
                if (net.isIP(bare)) return bare; // checked with the URL (#urlCheck)
                return (await this.#checked(hostname))[0]!.address;
              },
            })
          : connect,
    });
    this.#dispatcher = new Dispatcher1Wrapper(this.#agent);
  }

  /**
   * Write-time check of a tenant's URL: a 400 naming `field` when the URL may never be called (bad
   * form, scheme, userinfo, length, or a literal host the policy refuses). Host names are not
   * resolved here; their addresses are checked at every connection.
   */
  checkUrl(url: string, field: string): URL {
    const result = this.#urlCheck(url);
    if ('refused' in result) throw errors.invalidField(field, result.refused);
    return result.url;
  }

  /**
   * Node's fetch under the policy: the URL is checked as by checkUrl, every address the host
   * resolves to is checked before connecting, a redirect is returned as it is (never followed).
   * Fails with EgressRefusedError, EgressTimeoutError or EgressConnectionError.
   */
  async fetch(url: string | URL, init: EgressRequestInit = {}): Promise<Response> {
    const checked = this.#urlCheck(String(url));
    if ('refused' in checked) throw new EgressRefusedError(checked.refused);
    const { timeoutMs = this.#timeoutMs, signal, maxResponseBytes, onResponseTooLarge, ...rest } = init;
    // The timer aborts with our own error as the reason, so the body stream fails with it too.
    const deadline = new AbortController();
    setTimeout(
      () =>
        deadline.abort(
          new EgressTimeoutError(`no complete response from ${checked.url.origin} within ${timeoutMs} ms`),
        ),
      timeoutMs,
    ).unref();
    try {
      const response = await fetch(checked.url, {
        ...rest,
        redirect: 'manual',
        signal: signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal,
        // RequestInit's types do not list dispatcher, Node's fetch takes it (undici's extension).
        dispatcher: this.#dispatcher,
      } as RequestInit);
      return maxResponseBytes === undefined
        ? response
        : limitedBody(response, maxResponseBytes, checked.url.origin, onResponseTooLarge);
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      throw toEgressError(err, checked.url.origin);
    }
  }

  /**
   * One request under the same policy, checks, timeout and errors as fetch, through undici's
   * request API: no WHATWG Request, Response, Headers or streams, about a quarter of fetch's CPU
   * per call (docs/benchmarks.md, "Webhook deliveries"). For the product's own hot path (webhook
   * deliveries); fetch stays for libraries that take a fetch. A redirect is returned, never followed.
   */
  async request(url: string, init: EgressRequestOptions): Promise<EgressResponse> {
    const { res } = await this.#send(url, init);
    return {
      status: res.statusCode,
      headers: res.headers,
      discardBody: (limitBytes) =>
        res.body.dump({ limit: limitBytes }).then(
          () => undefined,
          () => undefined,
        ),
    };
  }

  /**
   * fetch's signature for clients that read each answer whole (the LLM providers' SDKs), through
   * request: the answer is read to its end within the timeout (past maxResponseBytes it fails with
   * EgressResponseTooLargeError and the connection is dropped) and handed over as a Response made of
   * its bytes, at about 60 % of fetch's CPU per call (docs/benchmarks.md, "Agent runs"). Not for
   * streamed answers (server-sent events): the caller sees no byte before the last. A redirect is
   * returned, never followed. It asks for no content coding; a body coded anyway (gzip, deflate,
   * br) is decoded, to at most maxResponseBytes. Takes a string or bytes as the body.
   */
  async fetchWhole(url: string | URL, init: EgressRequestInit = {}): Promise<Response> {
    const { body, headers, method, timeoutMs, signal, maxResponseBytes = Infinity } = init;
    if (body != null && typeof body !== 'string' && !ArrayBuffer.isView(body) && !(body instanceof ArrayBuffer))
      throw new TypeError('fetchWhole sends a string or bytes as the body; use fetch for streams and forms');
    const sent = new Headers(headers ?? undefined);
    if (!sent.has('accept-encoding')) sent.set('accept-encoding', 'identity');
    const { res, origin } = await this.#send(String(url), {
      method: method ?? 'GET',
      headers: sent,
      body: body == null ? null : body instanceof ArrayBuffer ? new Uint8Array(body) : (body as string | Uint8Array),
      timeoutMs,
      signal: signal ?? undefined,
    });
    try {
      let bytes = await readWhole(res.body, maxResponseBytes, origin);
      const received = new Headers();
      for (const [name, value] of Object.entries(res.headers))
        if (Array.isArray(value)) for (const v of value) received.append(name, v);
        else if (value !== undefined) received.append(name, value);
      const coding = received.get('content-encoding')?.trim().toLowerCase();
      if (coding && coding !== 'identity') {
        bytes = await decoded(bytes, coding, maxResponseBytes, origin);
        received.delete('content-encoding');
        received.delete('content-length');
      }
      const bodyless = NULL_BODY_STATUSES.has(res.statusCode);
      return new Response(bodyless ? null : bytes, { status: res.statusCode, headers: received });
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      throw toEgressError(err, origin);
    }
  }

  /**
   * Sends one request under the policy: the URL checked, every address dialled checked, a deadline
   * for the whole exchange (the body included) and the caller's abort. The deadline and the
   * caller's listener end when the body closes; the body must be read or dumped.
   */
  async #send(
    url: string,
    init: Omit<EgressRequestOptions, 'headers' | 'body'> & {
      headers?: Record<string, string> | Headers | undefined;
      body?: string | Uint8Array | null | undefined;
    },
  ): Promise<{ res: Dispatcher.ResponseData; origin: string }> {
    const checked = this.#urlCheck(url);
    if ('refused' in checked) throw new EgressRefusedError(checked.refused);
    const { timeoutMs = this.#timeoutMs, signal } = init;
    if (signal?.aborted) throw signal.reason;
    const origin = checked.url.origin;
    const deadline = new AbortController();
    const timer = setTimeout(
      () => deadline.abort(new EgressTimeoutError(`no complete response from ${origin} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
    const onCallerAbort = () => deadline.abort(signal!.reason);
    signal?.addEventListener('abort', onCallerAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onCallerAbort);
    };
    try {
      const res = await this.#agent.request({
        origin,
        path: `${checked.url.pathname}${checked.url.search}`,
        method: init.method,
        // A Headers is an iterable of name-value pairs, which undici takes.
        headers: init.headers as Record<string, string> | undefined,
        body: init.body ?? null,
        signal: deadline.signal,
      });
      res.body.once('close', done);
      return { res, origin };
    } catch (err) {
      done();
      if (signal?.aborted && err === signal.reason) throw err;
      throw toEgressError(err, origin);
    }
  }

  /**
   * Why the policy refuses `url` as a destination, resolving its host now: its form, its literal
   * host, or an address its name resolves to (the rule, never the address); undefined when it may be
   * reached. For URLs the service hands on or dials later (an OAuth flow's endpoints): fetch checks
   * the addresses again at each connection. A name that does not resolve is not a refusal.
   */
  async refusal(url: string): Promise<string | undefined> {
    const checked = this.#urlCheck(url);
    if ('refused' in checked) return checked.refused;
    if (this.allowPrivate) return undefined;
    const host = checked.url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) return undefined; // a literal was checked with the URL
    const addresses = await this.#resolve(host).catch(() => []);
    for (const { address } of addresses) {
      const why = addressRefusal(address, this.#allowed, false);
      if (why !== null) return `the host ${host} resolves to ${why}, which the egress policy refuses; ${RESOLVED_HINT}`;
    }
    return undefined;
  }

  /** Closes the pooled connections. */
  async close(): Promise<void> {
    await this.#agent.close();
  }

  #urlCheck(text: string): { url: URL } | { refused: string } {
    const textProblem = urlTextProblem(text);
    if (textProblem) return { refused: textProblem };
    if (text.length > URL_MAX_LENGTH)
      return { refused: `must be at most ${URL_MAX_LENGTH} characters (got ${text.length})` };
    const url = URL.parse(text);
    if (url === null)
      return {
        refused: `must be an absolute URL such as https://hooks.example.com/workauto (got ${JSON.stringify(text.slice(0, 100))})`,
      };
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      return { refused: `must use https (got ${url.protocol}); ${ALLOW_PRIVATE_HINT}` };
    if (url.username !== '' || url.password !== '')
      return { refused: 'must not carry a user name or password (user:password@); remove them from the URL' };
    if (url.protocol === 'http:' && !this.allowPrivate)
      return { refused: `must use https, not http; ${ALLOW_PRIVATE_HINT}` };
    const refused = this.#hostRefusal(url.hostname);
    return refused === null ? { url } : { refused: `${refused}; ${ALLOW_PRIVATE_HINT}` };
  }

  /** Why a host as written (a name or an IP literal, IPv6 with or without brackets) is refused, if it is. */
  #hostRefusal(host: string): string | null {
    if (this.allowPrivate) return null;
    const bare = host.startsWith('[') ? host.slice(1, -1) : host;
    if (net.isIP(bare)) {
      const why = addressRefusal(bare, this.#allowed);
      return why === null ? null : `${bare} is ${why}`;
    }
    const name = bare.toLowerCase().replace(/\.$/, '');
    // RFC 6761: localhost and its subdomains are loopback, whatever a resolver says.
    return name === 'localhost' || name.endsWith('.localhost') ? `${host} is a loopback name (localhost)` : null;
  }

  /**
   * net.connect's lookup: resolves the name, refuses the connection when any address is refused, and
   * hands net only the addresses checked, so the one dialled is always one of them.
   */
  readonly #lookup: LookupFunction = (hostname, options, callback) => {
    this.#checked(hostname).then(
      (addresses) => {
        const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
        const wanted = family ? addresses.filter((a) => a.family === family) : addresses;
        if (options.all)
          return callback(
            null,
            wanted.map((a) => ({ address: a.address, family: a.family })),
          );
        const first = wanted[0];
        if (!first)
          return callback(
            Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }),
            '',
            0,
          );
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };

  /** Every address of the name, once each is allowed; else EgressRefusedError (or the resolver's error). */
  async #checked(hostname: string): Promise<readonly ResolvedAddress[]> {
    const addresses = await this.#resolve(hostname);
    if (addresses.length === 0) throw Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' });
    for (const { address } of addresses) {
      // The rule, never the address: failure texts reach tenants, who must not map internal names to addresses.
      const why = this.allowPrivate ? null : addressRefusal(address, this.#allowed, false);
      if (why !== null)
        throw new EgressRefusedError(
          `the host ${hostname} resolves to ${why}, which the egress policy refuses; ${RESOLVED_HINT}`,
        );
    }
    return addresses;
  }
}

/** Statuses whose Response has no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/** A body read to its end; past `limit` bytes it is destroyed (the connection dropped) and EgressResponseTooLargeError thrown. */
async function readWhole(body: Dispatcher.ResponseData['body'], limit: number, origin: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let read = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    read += chunk.length;
    if (read > limit) {
      const err = new EgressResponseTooLargeError(limit, origin);
      body.destroy(err);
      throw err;
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, read);
}

const DECODERS: Record<string, (bytes: Buffer, options: zlib.ZlibOptions & zlib.BrotliOptions) => Promise<Buffer>> = {
  gzip: promisify(zlib.gunzip),
  'x-gzip': promisify(zlib.gunzip),
  deflate: promisify(zlib.inflate),
  br: promisify(zlib.brotliDecompress),
};

/** A body in a content coding, decoded to at most `limit` bytes (zlib stops there: a small bomb stays small). */
async function decoded(bytes: Buffer, coding: string, limit: number, origin: string): Promise<Buffer> {
  const decode = DECODERS[coding];
  if (!decode) throw new EgressConnectionError(`${origin} answered in the content coding ${coding}, which is not read`);
  try {
    return await decode(bytes, Number.isFinite(limit) ? { maxOutputLength: limit } : {});
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      throw new EgressResponseTooLargeError(limit, origin);
    throw new EgressConnectionError(`${origin} answered a body that is not valid ${coding}`, { cause: err });
  }
}

/** The response with a body that fails past `limit` bytes, cancelling the source (the connection) there. */
function limitedBody(
  response: Response,
  limit: number,
  origin: string,
  onTooLarge: ((err: EgressResponseTooLargeError) => void) | undefined,
): Response {
  if (!response.body) return response;
  const source: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
  let read = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await source.read();
      if (done) return controller.close();
      read += value.byteLength;
      if (read <= limit) return controller.enqueue(value);
      const err = new EgressResponseTooLargeError(limit, origin);
      controller.error(err);
      onTooLarge?.(err);
      await source.cancel(err).catch(() => undefined);
    },
    cancel: (reason) => source.cancel(reason),
  });
  const { status, statusText, headers } = response;
  return new Response(body, { status, statusText, headers });
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

/** What a socket error means, for errors whose own message names the address dialled. */
const SOCKET_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'the connection was refused (nothing listens on that port)',
  ECONNRESET: 'the connection was reset',
  ECONNABORTED: 'the connection was aborted',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  EADDRNOTAVAIL: 'the address is not available',
  EPIPE: 'the connection was closed while sending',
  EPROXY: 'the proxy refused the tunnel',
};

/** undici's fetch rejects with TypeError('fetch failed', { cause }); the cause says what happened. */
function toEgressError(err: unknown, origin: string): EgressError {
  let cause: unknown = err;
  for (let depth = 0; cause instanceof Error && depth < 5; depth++) {
    if (cause instanceof EgressError) return cause;
    const code = (cause as NodeJS.ErrnoException).code;
    if (code && TIMEOUT_CODES.has(code))
      return new EgressTimeoutError(`no connection or response from ${origin} in time (${code})`, { cause: err });
    if (code) {
      // A socket error's message names the address the host resolved to ("connect ECONNREFUSED 10.1.2.3:443"):
      // said in words instead, since these texts reach tenants.
      const what = 'address' in cause ? (SOCKET_ERRORS[code] ?? 'the connection failed') : cause.message;
      return new EgressConnectionError(`could not reach ${origin}: ${what} (${code})`, { cause: err });
    }
    if (cause.cause === undefined) break;
    cause = cause.cause;
  }
  const message = cause instanceof Error ? cause.message : String(cause);
  return new EgressConnectionError(`could not reach ${origin}: ${message}`, { cause: err });
}
