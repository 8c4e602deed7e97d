/**
 * What a failed exchange with an MCP server means (docs/apps.md "Probing"): `auth_failed` (it answered
 * 401/403: alive, bad credentials), `unreachable` (connection error, timeout, 5xx, refused by the
 * egress policy) or `protocol_error` (it answers, but not as MCP). Pure: the session records what
 * happened on the wire, this decides.
 */
import { blankSecrets } from '@workauto/crypto';

type FailureStatus = 'auth_failed' | 'unreachable' | 'protocol_error' | 'needs_authorization';

export interface Failure {
  status: FailureStatus;
  /** A sentence for status_reason and errors: no secret, at most REASON_MAX characters. */
  reason: string;
  /** The HTTP status that decided it, when one did (an OAuth app refreshes its token on a 401). */
  httpStatus?: number;
}

/** What the session saw, besides the error the SDK threw. */
export interface Observed {
  /** Every HTTP response, in order. */
  statuses: { method: string; status: number }[];
  /** Errors of the egress fetch (refused, timeout, connection). */
  fetchErrors: Error[];
  timedOut: boolean;
  timeoutMs: number;
}

const REASON_MAX = 500;

/** JSON-RPC error codes the SDK uses for its own timeouts and closed connections. */
const MCP_REQUEST_TIMEOUT = -32001;
const MCP_CONNECTION_CLOSED = -32000;

export function classifyFailure(err: unknown, observed: Observed, secrets: string[]): Failure {
  const failure = classify(err, observed);
  return { ...failure, reason: redact(failure.reason, secrets) };
}

function classify(err: unknown, observed: Observed): Failure {
  const timedOut =
    observed.timedOut ||
    (err as Error | null)?.name === 'EgressTimeoutError' ||
    observed.fetchErrors.some((e) => e.name === 'EgressTimeoutError');
  if (timedOut)
    return { status: 'unreachable', reason: `the server did not answer within ${observed.timeoutMs / 1000} s` };
  // libs/egress names the rule that refused it, never the address a name resolved to.
  const refused = observed.fetchErrors.find((e) => e.name === 'EgressRefusedError');
  if (refused) return { status: 'unreachable', reason: refused.message };
  const code = (err as { code?: unknown } | null)?.code;
  const name = (err as Error | null)?.name ?? '';
  if (name.startsWith('Egress')) return { status: 'unreachable', reason: (err as Error).message };
  if (observed.fetchErrors.length && !observed.statuses.length)
    return { status: 'unreachable', reason: observed.fetchErrors[0]!.message };
  // An HTTP status: the SDK's StreamableHTTPError/SseError carry it as `code`; its SSE POST errors
  // only in the text, so the last error status seen on the wire decides then.
  const status = typeof code === 'number' && code >= 100 && code < 600 ? code : lastErrorStatus(observed);
  if (status !== undefined) {
    if (status === 401 || status === 403) {
      return {
        status: 'auth_failed',
        reason: `the server refused the credential (HTTP ${status}); rotate the app's auth with a valid secret`,
        httpStatus: status,
      };
    }
    if (status >= 500) return { status: 'unreachable', reason: `the server answered HTTP ${status}` };
    if (status >= 300 && status < 400) {
      return {
        status: 'protocol_error',
        reason: `the server answered with a redirect (HTTP ${status}), which is never followed; set mcp_server_url to the final URL`,
      };
    }
    return {
      status: 'protocol_error',
      reason: `the server answered HTTP ${status}, not as an MCP server; check mcp_server_url`,
    };
  }
  if (code === MCP_REQUEST_TIMEOUT)
    return { status: 'unreachable', reason: `the server did not answer within ${observed.timeoutMs / 1000} s` };
  if (code === MCP_CONNECTION_CLOSED) return { status: 'unreachable', reason: 'the server closed the connection' };
  const message = err instanceof Error ? err.message : String(err);
  if (name === 'McpError')
    return { status: 'protocol_error', reason: `the server answered with an MCP error: ${message}` };
  return { status: 'protocol_error', reason: `the server did not answer as an MCP server: ${message}` };
}

function lastErrorStatus(observed: Observed): number | undefined {
  // A GET answered 405 is a Streamable HTTP server without a standalone event stream: not an error.
  const errors = observed.statuses.filter((s) => s.status >= 300 && !(s.method === 'GET' && s.status === 405));
  return errors.at(-1)?.status;
}

/** Blanks every secret out of a text and bounds its length (a server may echo what it was sent). */
export function redact(text: string, secrets: string[]): string {
  const out = blankSecrets(text, secrets).replace(/[\r\n\t]+/g, ' ');
  return out.length > REASON_MAX ? `${out.slice(0, REASON_MAX - 1)}…` : out;
}

/**
 * A tool result with every secret blanked out of its strings, at any depth (keys too): a server that
 * echoes the credential it was sent, in a result a member or a model reads, does not leak it.
 */
export function redactSecrets<T>(value: T, secrets: string[]): T {
  if (!secrets.some((s) => s.length > 0)) return value;
  const text = (s: string) => blankSecrets(s, secrets);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return text(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, inner]) => [text(k), walk(inner)]));
    return v;
  };
  return walk(value) as T;
}
