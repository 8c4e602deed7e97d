import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import { HttpBodyHeaders } from '@workauto/protos/workauto/api/v1/http.js';

const HEADERS_TYPE = 'type.googleapis.com/workauto.api.v1.HttpBodyHeaders';

/**
 * The HTTP headers an HttpBody response asks for (its first message's extensions, written by
 * httpBodyChunks): what the gateway sets on the response, by header name.
 */
export function httpBodyHeaders(body: {
  extensions?: { type_url: string; value: Uint8Array }[];
}): Record<string, string> {
  const ext = body.extensions?.find((e) => e.type_url === HEADERS_TYPE);
  if (!ext) return {};
  const { content_disposition } = HttpBodyHeaders.decode(ext.value);
  return content_disposition ? { 'Content-Disposition': content_disposition } : {};
}

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
  /** Headers of the HTTP response (the first chunk carries them), e.g. a download's file name. */
  headers?: Partial<HttpBodyHeaders>,
): AsyncGenerator<HttpBody> {
  let extensions = headers
    ? [
        {
          type_url: HEADERS_TYPE,
          value: Buffer.from(HttpBodyHeaders.encode(HttpBodyHeaders.fromPartial(headers)).finish()),
        },
      ]
    : [];
  const body = (texts: string[]): HttpBody => {
    const chunk = { content_type: contentType, data: Buffer.from(texts.join('')), extensions };
    extensions = [];
    return chunk;
  };
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
