import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, vars, z } from './index.js';

describe('loadConfig', () => {
  const shape = { PORT: vars.port(8080), DATABASE_URL: vars.url(), IDENTITY_ADDR: vars.address().optional(), NAME: z.string().default('x') };

  it('applies defaults and coerces numbers', () => {
    const c = loadConfig(shape, { DATABASE_URL: 'postgres://u@h/db', PORT: '9000' });
    assert.equal(c.PORT, 9000);
    assert.equal(c.NAME, 'x');
  });

  it('names every bad variable in one message and says what it got', () => {
    assert.throws(
      () => loadConfig(shape, { PORT: 'eighty', IDENTITY_ADDR: 'nohost' }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /PORT: .*\(got "eighty"\)/);
        assert.match(err.message, /DATABASE_URL: .*\(unset\)/);
        assert.match(err.message, /IDENTITY_ADDR: expected host:port/);
        return true;
      },
    );
  });

  it('reads durations such as 30s, 5m and 1h, and refuses others', () => {
    const d = { INTERVAL: vars.duration('5m', 1_000) };
    assert.equal(loadConfig(d, {}).INTERVAL, 300_000);
    assert.equal(loadConfig(d, { INTERVAL: '30s' }).INTERVAL, 30_000);
    assert.equal(loadConfig(d, { INTERVAL: '1h' }).INTERVAL, 3_600_000);
    for (const bad of ['5', '5 minutes', '-1s', '500ms', '']) {
      assert.throws(() => loadConfig(d, { INTERVAL: bad }), /INTERVAL: expected a duration of at least 1000 ms/, bad);
    }
  });
});
