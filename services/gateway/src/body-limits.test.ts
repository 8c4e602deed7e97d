import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BODY_LIMITS, checkBodyLimits } from './body-limits.js';

/** `{"a":{"a":…1…}}` with `levels` objects. */
const nested = (levels: number) => JSON.parse('{"a":'.repeat(levels) + '1' + '}'.repeat(levels)) as unknown;

describe('body limits', () => {
  it('counts containers: 32 levels pass, 33 do not, and arrays count like objects', () => {
    assert.equal(checkBodyLimits({ a: 1 }), undefined);
    assert.equal(checkBodyLimits(nested(32)), undefined);
    const over = checkBodyLimits(nested(33));
    assert.ok(over);
    assert.match(over.description, /deeper than 32/);
    assert.equal(over.field, Array(32).fill('a').join('.'), 'the 33rd object is the value at 32 keys deep');
    assert.ok(checkBodyLimits(JSON.parse('['.repeat(33) + ']'.repeat(33))));
    assert.equal(checkBodyLimits(JSON.parse('['.repeat(32) + ']'.repeat(32))), undefined);
    assert.equal(checkBodyLimits('a string'), undefined);
  });

  it('walks a 100,000-deep value without recursion', () => {
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)) as unknown;
    assert.match(checkBodyLimits(deep)!.description, /deeper than 32/);
  });

  it('bounds string length, array length and object keys', () => {
    assert.equal(checkBodyLimits({ body: 'x'.repeat(BODY_LIMITS.maxStringLength) }), undefined);
    assert.equal(checkBodyLimits({ body: 'x'.repeat(BODY_LIMITS.maxStringLength + 1) })?.field, 'body');
    assert.equal(checkBodyLimits({ tags: Array(BODY_LIMITS.maxArrayLength + 1).fill('t') })?.field, 'tags');
    const wide = Object.fromEntries(Array.from({ length: BODY_LIMITS.maxObjectKeys + 1 }, (_, i) => [`k${i}`, i]));
    assert.equal(checkBodyLimits({ metadata: wide })?.field, 'metadata');
    assert.equal(
      checkBodyLimits({ metadata: { list: [{ ok: 1 }, { bad: 'y'.repeat(BODY_LIMITS.maxStringLength + 1) }] } })?.field,
      'metadata.list[1].bad',
    );
  });
});
