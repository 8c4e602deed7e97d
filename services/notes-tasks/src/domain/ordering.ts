/** Dense 1-based positions among siblings. */

export type Anchor = { before: string } | { after: string } | undefined;

/**
 * `ids` (in position order) with `id` placed right before or after the anchor, or last without
 * one. Returns undefined when the anchor is not among the ids (or is the task itself).
 */
export function place(ids: readonly string[], id: string, anchor: Anchor): string[] | undefined {
  const rest = ids.filter((x) => x !== id);
  if (!anchor) return [...rest, id];
  const target = 'before' in anchor ? anchor.before : anchor.after;
  const index = rest.indexOf(target);
  if (target === id || index < 0) return undefined;
  const at = 'before' in anchor ? index : index + 1;
  return [...rest.slice(0, at), id, ...rest.slice(at)];
}

export function sameOrder(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
