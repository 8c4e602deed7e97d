/**
 * Position after the last row of a page in (created_at DESC, id DESC) order. Repos take it and
 * filter with `(created_at, id) < ($at, $id)`, fetching size+1 rows to learn whether more exist.
 */
export interface KeysetCursor {
  at: Date;
  id: string;
}
