import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isUuid, newId } from './ids.js';

describe('newId', () => {
  it('makes distinct UUIDv7s that sort by creation, across many refills of its random pool', () => {
    const before = Date.now();
    const ids = Array.from({ length: 100_000 }, () => newId());
    const after = Date.now();
    assert.equal(new Set(ids).size, ids.length, 'no id twice');
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      assert.ok(isUuid(id) && id[14] === '7' && '89ab'.includes(id[19]!), `${id} is a UUIDv7`);
      // Within one millisecond the sequence counts up: a later id is greater, as a string and as bytes.
      if (i > 0) assert.ok(id > ids[i - 1]!, `${id} sorts after ${ids[i - 1]!}`);
    }
    const msecs = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    assert.ok(msecs(ids[0]!) >= before && msecs(ids.at(-1)!) <= after + 1, 'the time is the creation time');
  });
});
