/** Dense 1-based positions (stages in a pipeline, pipelines of a tenant, channels of a type). */

/** `ids` in order with `id` moved to 1-based `position` (clamped to 1..n). */
export function moveTo<T>(ids: readonly T[], id: T, position: number): T[] {
  const rest = ids.filter((x) => x !== id);
  const index = Math.max(0, Math.min(rest.length, position - 1));
  return [...rest.slice(0, index), id, ...rest.slice(index)];
}

/**
 * The order of a create request's stages: by their display_order when every stage gives one
 * (distinct values), by array order when none does. Returns the indexes in order, or a problem.
 */
export function orderOfInputs(orders: (number | undefined)[]): { order: number[] } | { problem: string } {
  const given = orders.filter((o) => o !== undefined);
  if (given.length === 0) return { order: orders.map((_, i) => i) };
  if (given.length !== orders.length) return { problem: 'give display_order for every stage or for none' };
  if (new Set(given).size !== given.length) return { problem: 'display_order values must be distinct' };
  return {
    order: orders
      .map((o, i) => ({ o: o!, i }))
      .sort((a, b) => a.o - b.o)
      .map((x) => x.i),
  };
}
