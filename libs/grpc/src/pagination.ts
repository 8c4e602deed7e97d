import { decodeCursor, encodeCursor, type KeysetPage, type PageQuery } from '@workauto/db';
import { errors } from './errors.js';

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

/** The contract's list envelope of a page the repo fetched; the cursor stays opaque. */
export function toPage<R, T>(page: KeysetPage<R>, map: (r: R) => T): Page<T> {
  return {
    data: page.rows.map(map),
    has_more: page.next !== undefined,
    ...(page.next ? { next_cursor: encodeCursor(page.next) } : {}),
  };
}
