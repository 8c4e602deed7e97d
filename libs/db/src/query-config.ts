/**
 * A query's config read, not copied.
 *
 * pg 8.23 copies every config object a query is given (a prepared statement's `{ name, text,
 * values }`), so that adding the callback and values does not change the caller's object. It copies
 * with `Object.getOwnPropertyDescriptors` and `Object.defineProperties`: 1.1–1.2 µs of CPU per query,
 * where the rest of building a Query takes 0.2–0.4 µs (a loop). Every statement of every service
 * pays it. Query's constructor reads ten fields of the config (QUERY_FIELDS), so this gives it a
 * new object with those ten, the callback and values applied. The caller's object is still not
 * changed. A text query is left to pg, which makes a new object for it anyway.
 *
 * A test reads pg's Query source: if a later pg reads another field of the config, it fails and
 * names the field to add here.
 */
import pg from 'pg';

/** The fields of a query config that pg's Query constructor reads (pg/lib/query.js). */
export const QUERY_FIELDS = [
  'text',
  'values',
  'rows',
  'types',
  'name',
  'queryMode',
  'binary',
  'portal',
  'callback',
  'rowMode',
] as const;

/** Every field Query reads, each one required: a field added to QUERY_FIELDS must be read below too. */
type QueryConfig = Record<(typeof QUERY_FIELDS)[number], unknown>;
type Normalize = (config: unknown, values?: unknown, callback?: unknown) => unknown;

let installed = false;

/** Makes every pg Query of this process read its config instead of copying it (idempotent). */
export function readQueryConfigsWithoutCopy(): void {
  if (installed) return;
  installed = true;
  const utils = (pg as unknown as { utils?: { normalizeQueryConfig?: Normalize } }).utils;
  const original = utils?.normalizeQueryConfig;
  if (!utils || typeof original !== 'function')
    throw new Error('pg changed: its utils no longer have the normalizeQueryConfig libs/db query-config.ts replaces');
  utils.normalizeQueryConfig = (config, values, callback) => {
    if (config === null || typeof config !== 'object') return original(config, values, callback);
    const given = config as Partial<QueryConfig>;
    const read: QueryConfig = {
      text: given.text,
      values: given.values,
      rows: given.rows,
      types: given.types,
      name: given.name,
      queryMode: given.queryMode,
      binary: given.binary,
      portal: given.portal,
      callback: given.callback,
      rowMode: given.rowMode,
    };
    // As pg's own: values may be the callback; a callback given apart wins.
    if (values) {
      if (typeof values === 'function') read.callback = values;
      else read.values = values;
    }
    if (callback) read.callback = callback;
    return read;
  };
}
