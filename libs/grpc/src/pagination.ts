import type { KeysetCursor } from '@workauto/db';
import { errors } from './errors.js';

/** Page sizes of the contract (§3): default 50, larger values clamped to 200. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;

export interface PageRequest {
  size: number;
  after: KeysetCursor | undefined;
}

/** Reads `limit` and `cursor` of a list request; 0, negative or a foreign cursor is a 400. */
export function parsePage(req: { limit?: number | undefined; cursor?: string | undefined }): PageRequest {
  let size = DEFAULT_PAGE_SIZE;
  if (req.limit !== undefined) {
    if (!Number.isInteger(req.limit) || req.limit < 1) throw errors.invalidField('limit', 'must be a positive integer (at most 200)');
    size = Math.min(req.limit, MAX_PAGE_SIZE);
  }
  return { size, after: decodeCursor(req.cursor) };
}

/** Opaque to clients: base64url of the last row's sort key. */
export function encodeCursor(c: KeysetCursor): string {
  return Buffer.from(JSON.stringify([c.at.toISOString(), c.id])).toString('base64url');
}

function decodeCursor(cursor: string | undefined): KeysetCursor | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    const date = new Date(String(at));
    if (typeof id !== 'string' || Number.isNaN(date.getTime())) throw new Error('bad cursor');
    return { at: date, id };
  } catch {
    throw errors.invalidField('cursor', 'is not a cursor this API returned; pass next_cursor of the previous page unchanged');
  }
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor?: string;
}

/** The envelope of a page from rows fetched with LIMIT size+1: the extra row only says there is more. */
export function toPage<R extends { created_at: Date; id: string }, T>(rows: R[], size: number, map: (r: R) => T): Page<T> {
  const has_more = rows.length > size;
  const kept = has_more ? rows.slice(0, size) : rows;
  const last = kept[kept.length - 1];
  return {
    data: kept.map(map),
    has_more,
    ...(has_more && last ? { next_cursor: encodeCursor({ at: last.created_at, id: last.id }) } : {}),
  };
}
