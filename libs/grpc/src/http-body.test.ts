import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { httpBodyChunks } from './http-body.js';

async function* texts(...pieces: string[]) {
  yield* pieces;
}

async function collect(pieces: AsyncIterable<string>, chunkBytes: number) {
  const out = [];
  for await (const chunk of httpBodyChunks(pieces, 'text/csv', chunkBytes)) out.push(chunk);
  return out;
}

describe('httpBodyChunks', () => {
  it('gathers pieces into chunks of at least the size, counted in bytes, and sends the rest last', async () => {
    const chunks = await collect(texts('ab', 'é', 'cd', 'e'), 4);
    assert.deepEqual(
      chunks.map((c) => Buffer.from(c.data).toString()),
      ['abé', 'cde'],
    );
    assert.ok(chunks.every((c) => c.content_type === 'text/csv'));
  });

  it('answers one empty chunk for a stream without text, so the content type still reaches the client', async () => {
    const chunks = await collect(texts(), 4);
    assert.deepEqual(
      chunks.map((c) => [c.content_type, c.data.length]),
      [['text/csv', 0]],
    );
  });
});
