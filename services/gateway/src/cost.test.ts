import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CostPacer, requestCost } from './cost.js';
import { StreamPace } from './stream-slots.js';

const request = (method: string, body?: unknown, contentLength?: number) => ({
  method,
  body,
  get: (name: string) =>
    name.toLowerCase() === 'content-length' && contentLength !== undefined ? String(contentLength) : undefined,
});

describe("a request's cost in its tenant's budget", () => {
  it('is 1 for reads and ordinary writes, plus a unit per started 8 KiB past the first, plus 50 for a recurrence rule', () => {
    assert.equal(requestCost(request('GET')), 1);
    assert.equal(requestCost(request('DELETE')), 1);
    assert.equal(requestCost(request('POST', { title: 'x' }, 13)), 1);
    assert.equal(requestCost(request('POST', { title: 'x' }, 8 * 1024)), 1);
    assert.equal(requestCost(request('POST', { title: 'x' }, 8 * 1024 + 1)), 2);
    // A note of 100 KB with 16 KiB of metadata.
    assert.equal(requestCost(request('POST', { body: 'x' }, 116_100)), 15);
    assert.equal(requestCost(request('POST', { rrule: 'FREQ=DAILY' }, 200)), 51);
    assert.equal(requestCost(request('PATCH', { rrule: '' }, 200)), 1, 'clearing a rule expands nothing');
    // A chunked body (no Content-Length) is measured as its JSON.
    assert.equal(requestCost(request('POST', { body: 'y'.repeat(40_000) })), 5);
  });
});

describe('the pace of a tenant’s heavy writes', () => {
  it("lets a second's budget (at least two series) go at once, then refills at its rate, per tenant", () => {
    let now = 1_000_000;
    const pacer = new CostPacer(6_000, () => now);
    // 102 units at once (two series' worth, above a second's 100): 7 notes of 100 KB (14 units past their first).
    let passed = 0;
    while (pacer.take('a', 14).ok) passed++;
    assert.equal(passed, 7);
    assert.deepEqual(pacer.take('a', 14), { ok: false, retryAfterSeconds: 1 }, '4 units left, 100 a second come back');
    assert.equal(pacer.take('b', 14).ok, true, 'another tenant has its own bucket');
    assert.equal(pacer.take('a', 0).ok, true, 'an ordinary request is never paced');
    now += 100; // 10 units back
    assert.equal(pacer.take('a', 14).ok, true);
    // Series (50 units past their first): 2 of a full bucket, then two a second.
    now += 10_000;
    for (let i = 0; i < 2; i++) assert.equal(pacer.take('a', 50).ok, true);
    assert.deepEqual(pacer.take('a', 50), { ok: false, retryAfterSeconds: 1 });
    now += 500;
    assert.equal(pacer.take('a', 50).ok, true);
  });

  it('holds a second of a large budget at once', () => {
    const pacer = new CostPacer(60_000, () => 0);
    let passed = 0;
    while (pacer.take('a', 10).ok) passed++;
    assert.equal(passed, 100, '1,000 units: a second of 60,000 a minute');
  });

  it('always fits two recurring series at once, whatever the budget, and takes back what a refusal gave back', () => {
    const pacer = new CostPacer(60, () => 0);
    assert.equal(pacer.take('a', 50).ok, true);
    assert.equal(pacer.take('a', 50).ok, true);
    assert.equal(pacer.take('a', 50).ok, false);
    pacer.giveBack('a', 50);
    assert.equal(pacer.take('a', 50).ok, true);
  });
});

describe("the pace of a tenant's streams", () => {
  it('sends a burst at once, then waits for the bytes to come back at the rate, one tenant apart from another', async () => {
    // A clock moved by hand: each sleep is recorded with its length and ended by the test.
    const sleeps: { ms: number; end(): void }[] = [];
    const clock = {
      now: () => new Date(0),
      sleep: (ms: number) => new Promise<void>((end) => sleeps.push({ ms, end })),
    };
    const pace = new StreamPace(1_000, 500, clock);
    const signal = new AbortController().signal;
    await pace.spend('a', 500, signal); // the burst
    let sent = false;
    const next = pace.spend('a', 250, signal).then(() => (sent = true));
    await pace.spend('b', 500, signal); // another tenant's own burst: no wait
    assert.deepEqual(
      sleeps.map((s) => s.ms),
      [250],
      "a's stream waits for its 250 bytes to come back at 1,000 a second",
    );
    assert.equal(sent, false);
    sleeps[0]!.end();
    await next;
    assert.equal(sent, true);
  });
});
