import type pg from 'pg';
import { isUuid } from './ids.js';
import { shapedStatement, type Queryable } from './pool.js';

/**
 * Keyset pagination, the one way every list pages (docs/api.md §6: newest first, ties by id).
 *
 * The cursor keeps the sort key at PostgreSQL's full precision (microseconds), as UTC ISO-8601
 * text written by PostgreSQL itself: a JS Date keeps milliseconds only, and a cursor rounded to
 * the millisecond skips every row that shares the boundary row's millisecond.
 */
export interface KeysetCursor {
  /** The last row's sort key, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, microseconds). */
  at: string;
  id: string;
}

/** How a list is ordered: a timestamptz key, ties by id, both in the same direction. */
export interface KeysetOrder {
  /** SQL of the timestamptz sort key, e.g. `n.created_at`. From the repo's code, never from input. */
  key: string;
  /** SQL of the row's uuid id, e.g. `n.id`. */
  id: string;
  /** newest first (the default of docs/api.md §6) or oldest first. */
  direction?: 'newest_first' | 'oldest_first';
}

/** A page to fetch: its size and the cursor of the previous page, if any. */
export interface PageQuery {
  size: number;
  after?: KeysetCursor | undefined;
}

/**
 * A fetched page: at most `size` rows, each row's own keyset (`keys[i]` is `rows[i]`'s, so the page
 * can be cut short after any row and continue there), and the cursor of the next page when more
 * rows follow the last one.
 */
export interface KeysetPage<R> {
  rows: R[];
  keys: KeysetCursor[];
  next?: KeysetCursor;
}

/** The query of a list without its order and paging: `SELECT <columns> FROM <from> WHERE <where>`. */
export interface ListQuery {
  columns: string;
  from: string;
  /** Filters (always the tenant's); placeholders `$1..$n` refer to `params`. */
  where: string;
  params: unknown[];
  order: KeysetOrder;
}

/** The default order (docs/api.md §6) on a table alias: `created_at DESC, id DESC`. */
export function newestFirst(alias?: string): KeysetOrder {
  const p = alias ? `${alias}.` : '';
  return { key: `${p}created_at`, id: `${p}id`, direction: 'newest_first' };
}

// PostgreSQL writes the key itself, whatever the session's DateStyle or TimeZone.
const keyText = (key: string) => `to_char(${key} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * Runs the list query for one page: the rows after `page.after` in `order`, at most `page.size`,
 * plus the next page's cursor when more rows follow (one extra row is fetched to know).
 */
export async function listPage<R extends pg.QueryResultRow>(
  db: Queryable,
  q: ListQuery,
  page: PageQuery,
): Promise<KeysetPage<R>> {
  const params = [...q.params];
  const param = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const desc = (q.order.direction ?? 'newest_first') === 'newest_first';
  const after = page.after
    ? `AND (${q.order.key}, ${q.order.id}) ${desc ? '<' : '>'} (${param(page.after.at)}::timestamptz, ${param(page.after.id)}::uuid)`
    : '';
  const dir = desc ? 'DESC' : 'ASC';
  const { rows } = await db.query<R & { keyset_at: string; keyset_id: string }>(
    shapedStatement(
      `SELECT ${q.columns}, ${keyText(q.order.key)} AS keyset_at, ${q.order.id} AS keyset_id
       FROM ${q.from}
      WHERE (${q.where}) ${after}
      ORDER BY ${q.order.key} ${dir}, ${q.order.id} ${dir}
      LIMIT ${param(page.size + 1)}`,
      params,
    ),
  );
  const kept = rows.slice(0, page.size);
  const keys = kept.map((r) => ({ at: r.keyset_at, id: r.keyset_id }));
  const last = keys[keys.length - 1];
  return {
    rows: kept.map(({ keyset_at: _at, keyset_id: _id, ...row }) => row as unknown as R),
    keys,
    ...(rows.length > page.size && last ? { next: last } : {}),
  };
}

const CURSOR_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** Opaque to clients: base64url of the JSON `[at, id]`. */
export function encodeCursor(c: KeysetCursor): string {
  return Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');
}

/**
 * The cursor `encodeCursor` wrote, or undefined for anything else (a foreign or damaged cursor).
 * Cursors issued before microsecond keys (milliseconds, `…:SS.fffZ`) still decode.
 */
export function decodeCursor(text: string): KeysetCursor | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) return undefined;
    const [at, id] = value as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string' || !CURSOR_AT.test(at) || !isUuid(id)) return undefined;
    if (Number.isNaN(Date.parse(at))) return undefined;
    return { at, id };
  } catch {
    return undefined;
  }
}
