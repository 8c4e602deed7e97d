import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { publicBaseUrlVar } from './public-url.js';

describe('PUBLIC_BASE_URL', () => {
  const parse = (text: string | undefined) => publicBaseUrlVar().safeParse(text);

  it('takes an absolute http(s) origin, and nothing means "the request\'s own"', () => {
    assert.equal(parse('https://api.example.com').data, 'https://api.example.com');
    assert.equal(parse('https://api.example.com:8443/').data, 'https://api.example.com:8443');
    assert.equal(parse('http://127.0.0.1:8080').data, 'http://127.0.0.1:8080');
    assert.equal(parse(undefined).data, undefined);
    assert.equal(parse('').data, undefined);
  });

  it('stops the start on a path, a query, user info or another scheme, saying what to write', () => {
    for (const bad of [
      'https://api.example.com/api/v1',
      'https://api.example.com?x=1',
      'https://user:pw@api.example.com',
      'ftp://api.example.com',
      'api.example.com',
    ]) {
      const res = parse(bad);
      assert.equal(res.success, false, bad);
      assert.match(
        res.error.issues[0]!.message,
        /is not an origin: write scheme:\/\/host\[:port\].*https:\/\/api\.example\.com/,
      );
    }
  });
});
