import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger, tapLogs } from './index.js';

describe('logger', () => {
  it('redacts secrets at the top level and nested, and writes JSON lines', () => {
    const lines: string[] = [];
    const stop = tapLogs((l) => lines.push(l));
    const log = createLogger('test', 'info');
    log.info({ api_key: 'wk_SECRET1', req: { headers: { authorization: 'Bearer wk_SECRET2' } }, body: { credential: 'SECRET3', nested: { token: 'SECRET4' } } }, 'hello');
    stop();
    const text = lines.join('');
    for (const s of ['SECRET1', 'SECRET2', 'SECRET3', 'SECRET4']) assert.equal(text.includes(s), false, `${s} leaked`);
    const entry = JSON.parse(lines[0]!);
    assert.equal(entry.msg, 'hello');
    assert.equal(entry.level, 'info');
    assert.equal(entry.api_key, '[redacted]');
  });
});
