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

describe('integers and optional ports', () => {
  const shape = {
    POOL_MAX: vars.integer(10, { min: 1, max: 1000, what: 'a whole number of connections from 1 to 1000' }),
    TIMEOUT_MS: vars.integer(3000, { min: 1, what: 'a positive integer of milliseconds' }),
    METRICS_PORT: vars.optionalPort(),
  };

  it('take the default when unset or empty, and the value when it is in range', () => {
    const read = (env: Record<string, string>) => {
      const c = loadConfig(shape, env);
      return [c.POOL_MAX, c.TIMEOUT_MS, c.METRICS_PORT];
    };
    assert.deepEqual(read({}), [10, 3000, undefined]);
    assert.deepEqual(read({ POOL_MAX: '', TIMEOUT_MS: '', METRICS_PORT: '' }), [10, 3000, undefined]);
    assert.deepEqual(read({ POOL_MAX: '1000', TIMEOUT_MS: '99999999', METRICS_PORT: '0' }), [1000, 99_999_999, 0]);
  });

  it('name the variable, what it should be and how to get the default when a value is bad', () => {
    for (const bad of ['0', '1001', '2.5', 'ten']) {
      assert.throws(
        () => loadConfig(shape, { POOL_MAX: bad }),
        new RegExp(
          `POOL_MAX: must be a whole number of connections from 1 to 1000; unset it for 10 \\(got "${bad}"\\)`,
        ),
      );
    }
    assert.throws(
      () => loadConfig(shape, { TIMEOUT_MS: '5s' }),
      /TIMEOUT_MS: must be a positive integer of milliseconds; unset it for 3000 \(got "5s"\)/,
    );
    for (const bad of ['http', '70000', '-1'])
      assert.throws(
        () => loadConfig(shape, { METRICS_PORT: bad }),
        new RegExp(`METRICS_PORT: must be a port number \\(0–65535\\), or unset \\(got "${bad}"\\)`),
      );
  });
});
