/**
 * One of Node's process.nextTick records, kept for the life of the process, so that V8 keeps the
 * records' hidden classes and with them nextTick's fast path.
 *
 * nextTick builds each record with an object literal keyed by symbols. At that literal V8 remembers
 * the hidden class it started from, and falls back to a generic path for good (about 290 ns a call
 * instead of 30) the first time it meets another one. It meets another after an idle moment: no
 * record alive, a full garbage collection frees the records' hidden classes, and the next record
 * builds new ones. The process then pays it on every tick for the rest of its life: an API request
 * is 23 ticks in the gateway alone (docs/benchmarks.md, "Node's nextTick records"). A record kept
 * alive keeps its hidden classes alive.
 */
import { createHook } from 'node:async_hooks';

let kept: object | undefined;

/** Keeps one nextTick record alive. Call it first thing in a process; calling it again does nothing. */
export function keepNextTickRecord(): void {
  if (kept) return;
  // An init hook is the one place a record can be seen; it is on for this one tick only.
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject') kept ??= resource;
    },
  }).enable();
  process.nextTick(() => undefined);
  hook.disable();
}
