/** Server-Sent Events as the WHATWG HTML standard reads them (text/event-stream, UTF-8). */

export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/** One event: its id (what Last-Event-ID sends back), its type and its data, JSON on one line. */
export function sseEvent(id: number, event: string, data: unknown): string {
  // JSON.stringify escapes CR and LF inside strings, so the data is one `data:` line.
  return `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** A comment: clients ignore it, but it keeps proxies from closing a quiet connection. */
export function sseComment(text: string): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}

/** How long a client waits before it reconnects after the stream ended or broke. */
export function sseRetry(ms: number): string {
  return `retry: ${ms}\n\n`;
}
