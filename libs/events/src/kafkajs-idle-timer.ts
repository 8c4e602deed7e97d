/**
 * kafkajs 2.2.4 (its last release) keeps a 1 ms timer running on every broker connection for as
 * long as the connection lives. After each response it re-arms a timer meant for requests held back
 * by throttling or by the in-flight cap, whether or not one is held back. With none held back and
 * no throttling, its delay is negative, which Node runs after 1 ms; the timer then re-arms itself.
 * That is about a thousand wake-ups a second per connection: an idle identity or webhooks
 * process spent 20–30 ms of CPU a second on them (docs/benchmarks.md, "Idle CPU").
 *
 * A request is held back only in RequestQueue.push, which arms the timer itself when it does, and
 * the timer's own run re-arms it while any are left. So with none held back there is nothing for
 * the timer to do: `scheduleCheckPendingRequests` returns without arming it. With requests held
 * back, kafkajs's own method runs unchanged (the throttle's end, or 10 ms).
 *
 * The queue's fields are kafkajs's internals: if a later kafkajs renames them, this falls back to
 * its method, and kafkajs-idle-timer.test.ts fails, which says to look again.
 */
import { createRequire } from 'node:module';

/** What this module reads of kafkajs's RequestQueue (src/network/requestQueue/index.js). */
export interface KafkaRequestQueue {
  pending: unknown;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  scheduleCheckPendingRequests(): void;
  checkPendingRequests(): void;
}

type RequestQueueClass = { prototype: KafkaRequestQueue } & (new (
  options: Record<string, unknown>,
) => KafkaRequestQueue);

/** kafkajs's RequestQueue class, the one its connections use (the same module instance). */
export const KafkaRequestQueueClass = createRequire(import.meta.url)(
  'kafkajs/src/network/requestQueue/index.js',
) as RequestQueueClass;

const PATCHED = Symbol.for('workauto.kafkajs.idleTimer');

/** Stops kafkajs's per-connection timer from running while no request waits (idempotent). */
export function stopIdleRequestQueueTimers(): void {
  const proto = KafkaRequestQueueClass.prototype as KafkaRequestQueue & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const original = proto.scheduleCheckPendingRequests;
  proto.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(this: KafkaRequestQueue) {
    if (Array.isArray(this.pending) && this.pending.length === 0) return;
    original.call(this);
  };
  proto[PATCHED] = true;
}
