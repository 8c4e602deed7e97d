import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { decodeCursor, encodeCursor, type KeysetCursor, type KeysetPage, type PageQuery } from '@workauto/db';
import { parseRfc3339 } from '@workauto/protos';
import { errors } from './errors.js';
import { encodedSizeBound } from './message-size.js';

/** Page sizes (docs/api.md §6): default 50, larger values clamped to 200. */
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 200;

/** A list request's page: pass it to the repo, which pages with `listPage` from @workauto/db. */
export type PageRequest = PageQuery;

/** A list's own cursor text, both ways: parsePage decodes it, toPage encodes it. */
export interface CursorCodec<K> {
  /** The key a cursor names, or undefined for text this list never issued. */
  decode(text: string): K | undefined;
  encode(key: K): string;
  /** What the 400 of a cursor decode refuses says (default: pass next_cursor unchanged). */
  rule?: string;
  /** False for a cursor whose text docs/api.md §7 fixes (agent runs' timestamp): it is not bound to its list. */
  bound?: boolean;
}

/** The rpc being answered and its request: what a list's cursors are bound to (GrpcServer sets it for every call). */
export const listCallScope = new AsyncLocalStorage<{ path: string; request: unknown }>();

/**
 * `=` ends a base64url text for Node's decoder, so a bound cursor is `<the list's own cursor>=<binding>`
 * and the previous release's pods, which know no binding, still read it during a rolling upgrade.
 */
const BINDING = '=';

/**
 * The list and filters a cursor belongs to (docs/api.md §7): a short hash of the rpc and every
 * field of its request but limit and cursor, so that a cursor given to another list, or with other
 * filters, is refused instead of silently reading the wrong rows. Outside a call (unit tests), none.
 */
function bindingOf(): string | undefined {
  const call = listCallScope.getStore();
  if (!call) return undefined;
  const { limit: _limit, cursor: _cursor, ...filters } = (call.request ?? {}) as Record<string, unknown>;
  return createHash('sha256')
    .update(call.path)
    .update('\0')
    .update(canonicalJson(filters))
    .digest('base64url')
    .slice(0, 12);
}

/** JSON with object keys sorted and undefined left out: the same request gives the same text. */
function canonicalJson(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (value instanceof Uint8Array) return JSON.stringify(Buffer.from(value).toString('base64'));
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  // JSON.stringify answers undefined for undefined, though its type says string.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
  return JSON.stringify(value) ?? 'null';
}

/** A page's next_cursor: the list's own cursor text with the list's binding. */
function bindCursor(text: string, bound: boolean): string {
  const binding = bound ? bindingOf() : undefined;
  return binding ? `${text}${BINDING}${binding}` : text;
}

/**
 * The list's own cursor text of a request's cursor; a cursor bound to another list or to other
 * filters is a 400. A cursor without a binding (one the previous release issued) is still read.
 */
function unbindCursor(cursor: string, bound: boolean): string {
  const at = bound ? cursor.lastIndexOf(BINDING) : -1;
  if (at < 0) return cursor;
  const binding = bindingOf();
  if (binding !== undefined && cursor.slice(at + 1) !== binding)
    throw errors.invalidField(
      'cursor',
      'is from another list or other filters: pass next_cursor only to the list it came from, with the same query parameters (limit aside), or leave it out to start from the first page',
    );
  return cursor.slice(0, at);
}

const NO_ID = '00000000-0000-0000-0000-000000000000';

/**
 * A cursor that is a timestamp, for lists whose key is unique within the list and whose cursor docs/api.md §7 fixes
 * the cursor as RFC 3339 (agent runs: the created_at of the last item, next page strictly older).
 * Newest first: the next page holds the rows whose key is strictly before the cursor's instant. A
 * cursor with more than microseconds (PostgreSQL's precision) is rounded up to the microsecond,
 * which keeps "strictly before" exact. Encoded as listPage writes keys: UTC, six fractional digits.
 */
export const timestampCursor: CursorCodec<KeysetCursor> = {
  decode(text) {
    const ts = parseRfc3339(text);
    if (!ts) return undefined;
    const micros = Math.ceil(ts.nanos / 1_000);
    const seconds = ts.seconds + Math.floor(micros / 1_000_000);
    const at = `${new Date(seconds * 1_000).toISOString().slice(0, 19)}.${String(micros % 1_000_000).padStart(6, '0')}Z`;
    // The smallest id: with the key unique, "(key, id) < (at, id)" is "key < at".
    return { at, id: NO_ID };
  },
  encode: (key) => key.at,
  rule: 'must be an RFC 3339 timestamp: next_cursor of the previous page (the created_at of its last item)',
  bound: false,
};

/**
 * Reads `limit` and `cursor` of a list request; 0, negative, a foreign cursor or one of another list
 * or other filters is a 400. A list
 * whose order is not a keyset of one table (calendar occurrences), or whose cursor docs/api.md §7 fixes
 * (agent runs), passes its own cursor decoder or codec.
 */
export function parsePage(req: { limit?: number | undefined; cursor?: string | undefined }): PageRequest;
export function parsePage<C>(
  req: { limit?: number | undefined; cursor?: string | undefined },
  decode: ((text: string) => C | undefined) | CursorCodec<C>,
): { size: number; after?: C };
export function parsePage<C>(
  req: { limit?: number | undefined; cursor?: string | undefined },
  cursor: ((text: string) => C | undefined) | CursorCodec<C> = decodeCursor as unknown as (
    text: string,
  ) => C | undefined,
): { size: number; after?: C } {
  const decode = typeof cursor === 'function' ? cursor : (text: string) => cursor.decode(text);
  const bound = typeof cursor === 'function' || cursor.bound !== false;
  let size = DEFAULT_PAGE_SIZE;
  if (req.limit !== undefined) {
    if (!Number.isInteger(req.limit) || req.limit < 1)
      throw errors.invalidField('limit', 'must be at least 1 (a value above 200 is taken as 200)');
    size = Math.min(req.limit, MAX_PAGE_SIZE);
  }
  if (req.cursor === undefined || req.cursor === '') return { size };
  const after = decode(unbindCursor(req.cursor, bound));
  if (!after)
    throw errors.invalidField(
      'cursor',
      (typeof cursor === 'object' && cursor.rule) ||
        'is not a cursor this API returned; pass next_cursor of the previous page unchanged',
    );
  return { size, after };
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor?: string;
}

/**
 * The most a page's items may take on the wire: gRPC clients refuse a message over 4 MiB, and the
 * envelope (and a caller that wraps the page) needs some room of its own.
 */
export const PAGE_MAX_BYTES = 3 * 1024 * 1024;

/** Rows fetched for a page, each row's key beside it, and the key after the last row when more follow. */
export interface FetchedPage<R, K> {
  rows: R[];
  keys: K[];
  next?: K;
}

/**
 * The list envelope (docs/api.md §6) of a page the repo fetched; the cursor stays opaque. The page stops
 * early, after the last item that keeps the items under PAGE_MAX_BYTES (an upper bound of their
 * protobuf encoding, encodedSizeBound), and then continues after that item: every list answers,
 * whatever its records weigh. A single item over the budget still goes, alone. A list with its own
 * cursor (calendar occurrences) passes the encoder of its keys.
 */
export function toPage<R, T>(page: KeysetPage<R>, map: (r: R) => T): Page<T>;
export function toPage<R, T, K>(
  page: FetchedPage<R, K>,
  map: (r: R) => T,
  encode: ((key: K) => string) | CursorCodec<K>,
): Page<T>;
export function toPage<R, T, K>(
  page: FetchedPage<R, K>,
  map: (r: R) => T,
  cursor: ((key: K) => string) | CursorCodec<K> = encodeCursor as unknown as (key: K) => string,
): Page<T> {
  const own = typeof cursor === 'function' ? cursor : (key: K) => cursor.encode(key);
  const bound = typeof cursor === 'function' || cursor.bound !== false;
  const encode = (key: K) => bindCursor(own(key), bound);
  const data: T[] = [];
  let bytes = 0;
  let next = page.next;
  for (const [i, row] of page.rows.entries()) {
    const item = map(row);
    bytes += encodedSizeBound(item);
    if (data.length > 0 && bytes > PAGE_MAX_BYTES) {
      next = page.keys[i - 1];
      break;
    }
    data.push(item);
  }
  return { data, has_more: next !== undefined, ...(next !== undefined ? { next_cursor: encode(next) } : {}) };
}
