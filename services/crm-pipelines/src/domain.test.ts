import { isIsoDate } from '@workauto/grpc';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KEY_VERSION, canonicalize } from './domain/channels.js';
import { amountProblem, confidenceProblem, minorUnitDigits, normalizeCurrency } from './domain/money.js';
import { moveTo, orderOfInputs } from './domain/ordering.js';

const canon = (type: Parameters<typeof canonicalize>[0], value: string, region?: string) => {
  const c = canonicalize(type, value, region);
  return c.ok ? c.canonical : `!${c.field}`;
};

describe('channel canonicalisation', () => {
  it('trims and lowercases email addresses, keeping dots and +tags', () => {
    assert.equal(canon('email', '  John.Doe+Sales@Example.COM '), 'john.doe+sales@example.com');
    assert.equal(canon('email', 'not-an-email'), '!value');
    assert.equal(canon('email', 'a b@example.com'), '!value');
    assert.equal(canon('email', '   '), '!value');
  });

  it('writes phone numbers in E.164, national ones only with a region', () => {
    assert.equal(canon('phone', '+1 (213) 373-4253'), '+12133734253');
    assert.equal(canon('phone', '(213) 373-4253', 'US'), '+12133734253');
    assert.equal(canon('phone', '(213) 373-4253', 'us'), '+12133734253');
    assert.equal(canon('phone', '020 7946 0958', 'GB'), '+442079460958');
    assert.equal(
      canon('phone', '+44 20 7946 0958', 'US'),
      '+442079460958',
      'an international number ignores the region',
    );
    assert.equal(canon('phone', '(213) 373-4253'), '!value', 'national without a region');
    assert.equal(canon('phone', '+1 555'), '!value', 'too short');
    assert.equal(canon('phone', '+1 213 373 42531234'), '!value', 'too long');
    assert.equal(canon('phone', 'call me'), '!value');
    assert.equal(canon('phone', '2133734253', 'XX'), '!region');
    assert.equal(canon('phone', '2133734253', 'USA'), '!region');
  });

  it('normalises urls and linkedin handles, and trims other values', () => {
    assert.equal(canon('url', ' https://Example.COM/About '), 'https://example.com/About');
    assert.equal(canon('url', 'ftp://example.com'), '!value');
    assert.equal(canon('url', 'example.com'), '!value');
    assert.equal(canon('linkedin', 'https://www.LinkedIn.com/in/JaneDoe/'), 'linkedin.com/in/janedoe');
    assert.equal(canon('linkedin', 'linkedin.com/in/janedoe'), 'linkedin.com/in/janedoe');
    assert.equal(canon('other', '  @jane on Signal '), '@jane on Signal');
  });

  it('stamps the rules version', () => {
    const c = canonicalize('email', 'a@b.co');
    assert.ok(c.ok);
    assert.equal(c.keyVersion, KEY_VERSION);
    assert.equal(KEY_VERSION, 1);
  });
});

describe('money', () => {
  it('knows ISO 4217 codes and their minor units', () => {
    assert.equal(normalizeCurrency('usd'), 'USD');
    assert.equal(normalizeCurrency('EUR'), 'EUR');
    assert.equal(normalizeCurrency('XYZ'), undefined);
    assert.equal(normalizeCurrency('US'), undefined);
    assert.equal(minorUnitDigits('USD'), 2);
    assert.equal(minorUnitDigits('JPY'), 0);
    assert.equal(minorUnitDigits('KWD'), 3);
    // Asked again, from what the first answers kept.
    assert.equal(minorUnitDigits('JPY'), 0);
    assert.equal(minorUnitDigits('KWD'), 3);
  });

  it('accepts amounts with at most the currency’s decimals, and nothing negative, huge or non-finite', () => {
    assert.equal(amountProblem(19.99, 'USD'), undefined);
    assert.equal(amountProblem(0, 'USD'), undefined);
    assert.equal(amountProblem(1_000_000_000_000, 'USD'), undefined);
    assert.match(amountProblem(19.999, 'USD')!, /at most 2 decimals/);
    assert.match(amountProblem(0.1 + 0.2, 'USD')!, /at most 2 decimals/);
    assert.match(amountProblem(100.5, 'JPY')!, /at most 0 decimals/);
    assert.equal(amountProblem(100, 'JPY'), undefined);
    assert.equal(amountProblem(1.234, 'KWD'), undefined);
    assert.ok(amountProblem(-1, 'USD'));
    assert.ok(amountProblem(1e-7, 'USD'));
    assert.ok(amountProblem(1e13, 'USD'));
    assert.ok(amountProblem(Number.NaN, 'USD'));
    assert.ok(amountProblem(Number.POSITIVE_INFINITY, 'USD'));
  });

  it('accepts confidences that are fractions 0..1 with at most 4 decimals', () => {
    for (const ok of [0, 1, 0.5, 0.1234]) assert.equal(confidenceProblem(ok), undefined, String(ok));
    for (const bad of [-0.1, 1.01, 0.12345, Number.NaN]) assert.ok(confidenceProblem(bad), String(bad));
  });
});

describe('ordering and dates', () => {
  it('moves an item to a 1-based position, clamped', () => {
    assert.deepEqual(moveTo(['a', 'b', 'c', 'd'], 'd', 1), ['d', 'a', 'b', 'c']);
    assert.deepEqual(moveTo(['a', 'b', 'c', 'd'], 'a', 3), ['b', 'c', 'a', 'd']);
    assert.deepEqual(moveTo(['a', 'b', 'c'], 'a', 99), ['b', 'c', 'a']);
    assert.deepEqual(moveTo(['a', 'b', 'c'], 'c', 0), ['c', 'a', 'b']);
  });

  it('orders create-request stages by display_order, all or none, distinct', () => {
    assert.deepEqual(orderOfInputs([undefined, undefined]), { order: [0, 1] });
    assert.deepEqual(orderOfInputs([30, 10, 20]), { order: [1, 2, 0] });
    assert.ok('problem' in orderOfInputs([1, undefined]));
    assert.ok('problem' in orderOfInputs([1, 1]));
  });

  it('accepts real calendar dates only', () => {
    assert.equal(isIsoDate('2026-12-31'), true);
    assert.equal(isIsoDate('2028-02-29'), true);
    assert.equal(isIsoDate('2026-02-29'), false);
    assert.equal(isIsoDate('2026-13-01'), false);
    assert.equal(isIsoDate('31/12/2026'), false);
  });
});
