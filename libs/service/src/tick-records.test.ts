import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const FIXTURE = new URL('./fixtures/idle-ticks.js', import.meta.url);

/** V8's feedback on nextTick's record literal after an idle moment and a full collection. */
async function literalFeedback(keep: boolean): Promise<string[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', '--allow-natives-syntax', FIXTURE.pathname, ...(keep ? ['keep'] : [])],
    { maxBuffer: 16 << 20 },
  );
  const slots = stdout.split('\n').filter((line) => line.includes('DefineKeyedOwnPropertyInLiteral'));
  // The record literal has three symbol keys; without them V8 printed something else, and this test says nothing.
  assert.ok(slots.length >= 3, `V8's %DebugPrint no longer lists the literal's feedback:\n${stdout.slice(0, 2000)}`);
  return slots;
}

test('a process that keeps a nextTick record keeps nextTick on its fast path across an idle full GC', async () => {
  const slots = await literalFeedback(true);
  assert.deepEqual(
    slots.filter((s) => s.includes('MEGAMORPHIC')),
    [],
    'the record literal went generic although a record was kept',
  );
});

test('without it, the same idle moment sends the record literal to its generic path (what keepNextTickRecord prevents)', async () => {
  // If this ever fails, V8 or Node no longer lose the records' hidden classes: keepNextTickRecord can go.
  const slots = await literalFeedback(false);
  assert.ok(
    slots.some((s) => s.includes('MEGAMORPHIC')),
    `expected the generic (MEGAMORPHIC) record literal:\n${slots.join('\n')}`,
  );
});
