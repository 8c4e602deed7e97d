/**
 * A run's live progress as Server-Sent Events (GET …/runs/{id}/events): its steps and status
 * changes in the order of their numbers (migrations/0006), from the database, woken by the
 * process's LISTEN connection (live/hub.ts) whichever replica runs the run.
 */
import { errors, type CallContext } from '@workauto/grpc';
import type { StreamAgentRunEventsRequest } from '@workauto/protos/workauto/agents/v1/agents.js';
import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import { isTerminal, runEvents, runEventsView, type RunEvent } from '../../repo/run-events.js';
import { SSE_CONTENT_TYPE, sseComment, sseEvent, sseRetry } from '../../live/sse.js';
import { blueprintOf, runData, stepData, type AgentsDeps, type Handler } from '../common.js';

/** Events read (and sent as one chunk) at most at once: a step is at most ~10 KiB of JSON. */
const BATCH = 100;

export function streamAgentRunEvents(deps: AgentsDeps): Handler<'streamAgentRunEvents'> {
  const { pool } = deps;
  const { hub, settings } = deps.live;

  const chunk = (text: string): HttpBody => ({
    content_type: SSE_CONTENT_TYPE,
    data: Buffer.from(text),
    extensions: [],
  });

  async function* stream(req: StreamAgentRunEventsRequest, ctx: CallContext): AsyncGenerator<HttpBody> {
    const b = blueprintOf(req.blueprint);
    const after = req.last_event_id ?? 0;
    if (after < 0) throw errors.invalidField('last_event_id', 'must be 0 or more: the id: of the last event received');
    // Subscribed before the first read: a change committing while it reads wakes the first wait.
    const subscription = hub.subscribe(req.id.toLowerCase());
    try {
      let view = await runEventsView(pool, ctx.tenant, b.id, req.id.toLowerCase());
      if (!view) throw errors.notFound('agent_run', req.id);
      if (after > view.lastEventId) {
        throw errors.invalidField(
          'last_event_id',
          `is ${after}, past this run's last event (${view.lastEventId}): send the id: of an event this run's stream sent, or leave it out to start from the first event`,
        );
      }
      // Resumed after the end: nothing will come, so no stream (the gateway answers 204, which
      // tells an EventSource not to reconnect).
      if (isTerminal(view.run.status) && after >= view.lastStatusId) return;

      const started = Date.now();
      let lastWrite = started;
      let cursor = after;
      yield chunk(sseRetry(settings.retryMs)); // the response's headers go out now
      for (;;) {
        // Everything up to the view's last event has committed: read it in batches, in order.
        while (cursor < view.lastEventId) {
          const upTo = Math.min(view.lastEventId, cursor + BATCH);
          const { text, ended } = render(await runEvents(pool, ctx.tenant, view, cursor, upTo));
          cursor = upTo;
          if (text) {
            yield chunk(text);
            lastWrite = Date.now();
          }
          if (ended) return; // after the terminal status: what a cancelled run's worker writes after it is not sent
        }
        const left = settings.maxStreamMs - (Date.now() - started);
        if (left <= 0) {
          yield chunk(
            sseComment(
              `this stream reached its longest duration (${settings.maxStreamMs} ms); reconnect with Last-Event-ID to go on`,
            ),
          );
          return;
        }
        if (Date.now() - lastWrite >= settings.heartbeatMs) {
          yield chunk(sseComment('heartbeat'));
          lastWrite = Date.now();
        }
        await subscription.wait(Math.min(left, settings.heartbeatMs - (Date.now() - lastWrite)), [
          ctx.signal,
          hub.stopping,
        ]);
        ctx.signal.throwIfAborted();
        if (hub.stopping.aborted) {
          yield chunk(sseComment('this replica is shutting down; reconnect with Last-Event-ID to go on'));
          return;
        }
        // Woken, or at each heartbeat in case a notification was lost: where does the run stand now?
        view = (await runEventsView(pool, ctx.tenant, b.id, view.run.id)) ?? view;
      }
    } finally {
      subscription.close();
    }
  }

  return (req, ctx) => stream(req, ctx);
}

/** Events as SSE text, up to and including the run's terminal status (ended) if it is among them. */
function render(events: RunEvent[]): { text: string; ended: boolean } {
  let text = '';
  for (const e of events) {
    if (e.kind === 'step') {
      text += sseEvent(e.id, 'step', stepData(e.step));
      continue;
    }
    text += sseEvent(e.id, 'status', runData(e.run));
    // A run has one terminal status, its last one.
    if (isTerminal(e.run.status)) return { text, ended: true };
  }
  return { text, ended: false };
}
