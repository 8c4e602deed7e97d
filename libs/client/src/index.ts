/**
 * A typed client of the workauto REST API: openapi-fetch over the types openapi-typescript
 * generates at build time from the gateway's OpenAPI document (src/gen/openapi.ts, not committed),
 * so a path, parameter, body or response field the document does not have fails to compile.
 * See README.md.
 */
import createFetchClient, { type Client, type ClientOptions as FetchClientOptions } from 'openapi-fetch';
import type { components, paths, webhooks } from './gen/openapi.js';

export type { components, paths, webhooks };
/** The document's schemas by name, e.g. `Schemas['Note']`. */
export type Schemas = components['schemas'];
/** The body of every error response (the shape of docs/api.md §5). */
export type ErrorBody = Schemas['Error'];
export type WorkautoClient = Client<paths>;

export interface ClientOptions {
  /** The gateway's origin, e.g. `http://127.0.0.1:8080` (paths start with /api/v1). */
  baseUrl: string;
  /** An API key (`wk_…`), or the platform admin token for /api/v1/admin routes; none for public routes. */
  apiKey?: string;
  /** Headers sent with every request (beside Authorization). */
  headers?: Record<string, string>;
  /** Another fetch (tests, proxies); default the global one. */
  fetch?: FetchClientOptions['fetch'];
}

export function createClient(options: ClientOptions): WorkautoClient {
  return createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    headers: {
      ...options.headers,
      ...(options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {}),
    },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** An error response as an exception: the HTTP status, the error body (docs/api.md §5) and its reason. */
export class ApiError extends Error {
  readonly status: number;
  readonly body: ErrorBody | undefined;
  /** ErrorInfo's reason, e.g. NOTE_NOT_FOUND, RATE_LIMITED. */
  readonly reason: string | undefined;
  /** The invalid fields of a 400 (BadRequest's field violations). */
  readonly fieldViolations: { field: string; description: string }[];
  readonly requestId: string | undefined;

  constructor(response: Response, body: unknown) {
    const error = (body as ErrorBody | undefined)?.error;
    super(error?.message ?? `HTTP ${response.status} without the API's error body`);
    this.name = 'ApiError';
    this.status = response.status;
    this.body = body as ErrorBody | undefined;
    const details = error?.details ?? [];
    this.reason = details.find((d) => 'reason' in d)?.reason;
    this.fieldViolations = details.flatMap((d) => ('field_violations' in d ? d.field_violations : []));
    this.requestId = error?.request_id ?? response.headers.get('x-request-id') ?? undefined;
  }
}

/**
 * The data of a successful call, or an ApiError thrown for an error response:
 * `const note = await unwrap(client.POST('/api/v1/notes', { body: { title: 'Kick-off' } }))`.
 */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<Exclude<T, undefined>> {
  const { data, error, response } = await call;
  if (!response.ok) throw new ApiError(response, error);
  return data as Exclude<T, undefined>;
}

/**
 * Every item of a list endpoint's envelope (`{data, has_more, next_cursor}`), page after page:
 * `for await (const note of pages((cursor) => client.GET('/api/v1/notes', { params: { query: { cursor } } })))`.
 */
export async function* pages<Item>(
  page: (cursor: string | undefined) => Promise<{
    data?: { data: Item[]; has_more: boolean; next_cursor: string | null };
    error?: unknown;
    response: Response;
  }>,
): AsyncGenerator<Item> {
  let cursor: string | undefined;
  do {
    const { data, has_more, next_cursor } = await unwrap(page(cursor));
    yield* data;
    cursor = has_more && next_cursor ? next_cursor : undefined;
  } while (cursor);
}
