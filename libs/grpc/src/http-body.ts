import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';

/**
 * A stream of text as google.api.HttpBody chunks of about `chunkBytes`, for server-streaming routes
 * (a feed, an export): pieces are gathered until they reach the size, so memory holds one chunk and
 * the piece that filled it, whatever the stream's length. Nothing is sent before the first chunk is
 * full (or the text ends), so a failure while reading the first pieces is still an error, not a cut
 * stream. A stream without text answers one empty chunk, which carries the content type.
 */
export async function* httpBodyChunks(
  pieces: AsyncIterable<string>,
  contentType: string,
  chunkBytes: number,
): AsyncGenerator<HttpBody> {
  const body = (texts: string[]): HttpBody => ({
    content_type: contentType,
    data: Buffer.from(texts.join('')),
    extensions: [],
  });
  let pending: string[] = [];
  let size = 0;
  let sent = false;
  for await (const piece of pieces) {
    pending.push(piece);
    size += Buffer.byteLength(piece);
    if (size >= chunkBytes) {
      yield body(pending);
      sent = true;
      pending = [];
      size = 0;
    }
  }
  if (size > 0 || !sent) yield body(pending);
}
