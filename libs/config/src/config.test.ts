import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, parseDuration, vars, z } from './index.js';

describe('loadConfig', () => {
  const shape = {
    PORT: vars.port(8080),
    DATABASE_URL: vars.url(),
    IDENTITY_ADDR: vars.address().optional(),
    NAME: z.string().default('x'),
  };

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
});

describe('durations', () => {
  it('reads a whole number and a unit, and names the variable when it is not one', () => {
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('5m'), 300_000);
    assert.equal(parseDuration('5d'), 5 * 86_400_000);
    assert.equal(parseDuration('1.5h'), undefined);
    assert.equal(loadConfig({ GRACE: vars.duration('24h') }, {}).GRACE, 86_400_000);
    assert.throws(() => loadConfig({ GRACE: vars.duration('24h') }, { GRACE: 'soon' }), /GRACE: expected a duration/);
  });
});
