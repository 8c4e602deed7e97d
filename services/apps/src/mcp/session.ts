/**
 * A session with a tenant's MCP server through the official SDK client: Streamable HTTP first,
 * SSE when the server answers the Streamable POST with 404 or 405 (servers that predate it), every
 * HTTP request through the egress policy, and one deadline for the whole exchange.
 */
import { extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { EgressError, EgressResponseTooLargeError, EgressTimeoutError, type EgressPolicy } from '@workauto/egress';
import { classifyFailure, type Failure, type Observed } from '../domain/failures.js';

/** The credential headers of an app (never logged). */
type AuthHeaders = Record<string, string>;

export interface SessionOptions {
  url: string;
  headers: AuthHeaders;
  egress: EgressPolicy;
  timeoutMs: number;
  /** Secrets to blank out of any text kept from the exchange (a reason, an error). */
  secrets: string[];
  signal?: AbortSignal | undefined;
  /**
   * The most bytes of each HTTP answer read (a tool's result); past it the exchange ends at once
   * with EgressResponseTooLargeError, whatever the transport.
   */
  maxResponseBytes?: number | undefined;
}

/** What a server's 401 asked for (WWW-Authenticate, RFC 9728 §5.1): where its OAuth metadata is, which scopes. */
export interface Challenge {
  resourceMetadataUrl?: URL | undefined;
  scope?: string | undefined;
}

/** A failure of an exchange with an MCP server, already classified (docs/apps.md "Probing"). */
export class McpExchangeError extends Error {
  override name = 'McpExchangeError';
  constructor(
    readonly failure: Failure,
    /** The last 401's challenge, if the server answered one. */
    readonly challenge?: Challenge,
  ) {
    super(failure.reason);
  }
}

const CLIENT_INFO = { name: 'workauto-apps', version: '1.0.0' };

/**
 * Runs `work` with a connected client and closes it. Throws McpExchangeError (classified) on any
 * failure, or EgressResponseTooLargeError past maxResponseBytes; `work` gets the remaining time for
 * its own requests.
 */
export async function withMcpSession<T>(
  options: SessionOptions,
  work: (client: Client, request: { signal: AbortSignal; timeout: number }) => Promise<T>,
): Promise<T> {
  const deadlineAt = Date.now() + options.timeoutMs;
  const deadline = AbortSignal.timeout(options.timeoutMs);
  // An answer past maxResponseBytes ends the whole exchange at once (its requests abort, the race
  // below ends): the SDK's SSE reader would swallow the body's error and wait for the deadline.
  const cut = new AbortController();
  const signal = AbortSignal.any([...(options.signal ? [options.signal] : []), deadline, cut.signal]);
  const observed: Observed = {
    statuses: [],
    fetchErrors: [],
    timedOut: false,
    timeoutMs: options.timeoutMs,
  };
  let challenge: Challenge | undefined;
  const remaining = () => Math.max(1, deadlineAt - Date.now());
  const overLimit = new Promise<never>((_, reject) =>
    cut.signal.addEventListener('abort', () => reject(cut.signal.reason), { once: true }),
  );
  overLimit.catch(() => undefined);
  const limit =
    options.maxResponseBytes === undefined
      ? {}
      : {
          maxResponseBytes: options.maxResponseBytes,
          onResponseTooLarge: (err: EgressResponseTooLargeError) => cut.abort(err),
        };

  // Every request of the SDK goes through the egress policy, bounded by the session's deadline; what
  // happened on the wire is kept for the classification (the SDK's errors do not always carry it).
  const fetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    try {
      const response = await options.egress.fetch(url, {
        ...init,
        signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal,
        timeoutMs: remaining(),
        ...limit,
      });
      observed.statuses.push({ method: init?.method ?? 'GET', status: response.status });
      if (response.status === 401) {
        const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(response);
        challenge = { resourceMetadataUrl, scope };
      }
      return response;
    } catch (err) {
      if (err instanceof EgressError) observed.fetchErrors.push(err);
      throw err;
    }
  };
  // redirectPolicy 'follow' makes the SDK hand every response of our fetch back as it is (its default
  // follows same-origin redirects itself); egress.fetch never follows one, so a 3xx fails the exchange.
  const transportOptions = { fetch, requestInit: { headers: options.headers }, redirectPolicy: 'follow' as const };

  const attempt = async (transport: Transport): Promise<T> => {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    try {
      await client.connect(transport, { signal, timeout: remaining() });
      return await work(client, { signal, timeout: remaining() });
    } finally {
      await client.close().catch(() => undefined);
    }
  };

  const run = async (): Promise<T> => {
    const url = new URL(options.url);
    try {
      return await attempt(new StreamableHTTPClientTransport(url, transportOptions));
    } catch (err) {
      // Servers that speak only the older HTTP+SSE transport answer the Streamable POST with 404 or 405.
      if (err instanceof StreamableHTTPError && (err.code === 404 || err.code === 405)) {
        observed.statuses.length = 0;
        // Deprecated in the SDK as the MCP specification retired HTTP+SSE, which is still how those
        // servers speak; the specification asks clients to fall back to it (docs/apps.md).
        // eslint-disable-next-line @typescript-eslint/no-deprecated
        return await attempt(new SSEClientTransport(url, transportOptions));
      }
      throw err;
    }
  };

  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      observed.timedOut = true;
      reject(new EgressTimeoutError(`no answer within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
  });
  try {
    return await Promise.race([run(), timedOut, overLimit]);
  } catch (err) {
    if (cut.signal.aborted) throw cut.signal.reason;
    if (options.signal?.aborted && !deadline.aborted) throw options.signal.reason;
    if (deadline.aborted) observed.timedOut = true;
    throw new McpExchangeError(classifyFailure(err, observed, options.secrets), challenge);
  } finally {
    clearTimeout(timer);
  }
}
