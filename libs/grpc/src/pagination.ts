import { decodeCursor, encodeCursor, type KeysetPage, type PageQuery } from '@workauto/db';
import { errors } from './errors.js';
import { encodedSizeBound } from './message-size.js';

/** Page sizes of the contract (§3): default 50, larger values clamped to 200. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

/** A list request's page: pass it to the repo, which pages with `listPage` from @workauto/db. */
export type PageRequest = PageQuery;

/**
 * Reads `limit` and `cursor` of a list request; 0, negative or a foreign cursor is a 400. A list
 * whose order is not a keyset of one table (calendar occurrences) passes its own cursor decoder.
 */
export function parsePage(req: { limit?: number | undefined; cursor?: string | undefined }): PageRequest;
export function parsePage<C>(
  req: { limit?: number | undefined; cursor?: string | undefined },
  decode: (text: string) => C | undefined,
): { size: number; after?: C };
export function parsePage<C>(
  req: { limit?: number | undefined; cursor?: string | undefined },
  decode: (text: string) => C | undefined = decodeCursor as unknown as (text: string) => C | undefined,
): { size: number; after?: C } {
  let size = DEFAULT_PAGE_SIZE;
  if (req.limit !== undefined) {
    if (!Number.isInteger(req.limit) || req.limit < 1)
      throw errors.invalidField('limit', 'must be a positive integer (at most 200)');
    size = Math.min(req.limit, MAX_PAGE_SIZE);
  }
  if (req.cursor === undefined || req.cursor === '') return { size };
  const after = decode(req.cursor);
  if (!after)
    throw errors.invalidField(
      'cursor',
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
 * The contract's list envelope of a page the repo fetched; the cursor stays opaque. The page stops
 * early, after the last item that keeps the items under PAGE_MAX_BYTES (an upper bound of their
 * protobuf encoding, encodedSizeBound), and then continues after that item: every list answers,
 * whatever its records weigh. A single item over the budget still goes, alone. A list with its own
 * cursor (calendar occurrences) passes the encoder of its keys.
 */
export function toPage<R, T>(page: KeysetPage<R>, map: (r: R) => T): Page<T>;
export function toPage<R, T, K>(page: FetchedPage<R, K>, map: (r: R) => T, encode: (key: K) => string): Page<T>;
export function toPage<R, T, K>(
  page: FetchedPage<R, K>,
  map: (r: R) => T,
  encode: (key: K) => string = encodeCursor as unknown as (key: K) => string,
): Page<T> {
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
