import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Keyring, blankSecrets, generateToken, hint, sha256Hex, secretsEqual } from './index.js';

describe('Keyring', () => {
  it('round-trips a secret and never leaves it readable in the ciphertext', () => {
    const ring = Keyring.fromEnv(Keyring.generateSpec('k1'));
    const ct = ring.encrypt('sk-live-secret-value', 'integration_key:t1:openai');
    assert.match(ct, /^wk1\.k1\./);
    assert.equal(ct.includes('sk-live'), false);
    assert.equal(ring.decrypt(ct, 'integration_key:t1:openai'), 'sk-live-secret-value');
  });

  it('encrypts the same secret differently each time (fresh data key and IV)', () => {
    const ring = Keyring.fromEnv(Keyring.generateSpec());
    assert.notEqual(ring.encrypt('same', 'c'), ring.encrypt('same', 'c'));
  });

  it('keeps decrypting old ciphertexts after rotation, and encrypts with the new key', () => {
    const old = Keyring.generateSpec('k1');
    const before = Keyring.fromEnv(old).encrypt('value', 'ctx');
    const rotated = Keyring.fromEnv(`${Keyring.generateSpec('k2')},${old}`);
    assert.equal(rotated.decrypt(before, 'ctx'), 'value');
    assert.equal(Keyring.keyIdOf(rotated.encrypt('value', 'ctx')), 'k2');
  });

  it('refuses a ciphertext moved to another context, tampered with, or of an unknown key', () => {
    const ring = Keyring.fromEnv(Keyring.generateSpec('k1'));
    const ct = ring.encrypt('value', 'tenant-a');
    assert.throws(() => ring.decrypt(ct, 'tenant-b'), /does not authenticate/);
    const parts = ct.split('.');
    const body = Buffer.from(parts[3]!, 'base64url');
    body[14] = body[14]! ^ 1;
    assert.throws(
      () => ring.decrypt([...parts.slice(0, 3), body.toString('base64url')].join('.'), 'tenant-a'),
      /does not authenticate/,
    );
    const other = Keyring.fromEnv(Keyring.generateSpec('k9'));
    assert.throws(() => other.decrypt(ct, 'tenant-a'), /key k1, which is not in ENCRYPTION_KEYS/);
  });

  it('keeps a decrypted secret five minutes by context and ciphertext, and still refuses one moved to another context', () => {
    const ring = Keyring.fromEnv(Keyring.generateSpec('k1'));
    const opened: string[] = [];
    const decrypt = ring.decrypt.bind(ring);
    ring.decrypt = (ciphertext, context) => (opened.push(context), decrypt(ciphertext, context));
    const ct = ring.encrypt('whsec_value', 'endpoint:t1:e1');
    const t0 = 1_000_000;
    assert.equal(ring.decryptCached(ct, 'endpoint:t1:e1', t0), 'whsec_value');
    assert.equal(ring.decryptCached(ct, 'endpoint:t1:e1', t0 + 60_000), 'whsec_value');
    assert.deepEqual(opened, ['endpoint:t1:e1'], 'the second call was answered from the first');
    assert.throws(() => ring.decryptCached(ct, 'endpoint:t2:e1', t0 + 60_000), /does not authenticate/);
    const replaced = ring.encrypt('whsec_new', 'endpoint:t1:e1');
    assert.equal(ring.decryptCached(replaced, 'endpoint:t1:e1', t0 + 60_000), 'whsec_new');
    assert.equal(ring.decryptCached(ct, 'endpoint:t1:e1', t0 + 5 * 60_000), 'whsec_value');
    assert.deepEqual(
      opened,
      ['endpoint:t1:e1', 'endpoint:t2:e1', 'endpoint:t1:e1', 'endpoint:t1:e1'],
      'opened again after five minutes',
    );
  });

  it('keeps at most a thousand decrypted secrets, the oldest dropped first', () => {
    const ring = Keyring.fromEnv(Keyring.generateSpec('k1'));
    const cts = Array.from({ length: 1_001 }, (_, i) => ring.encrypt(`secret-${i}`, `c${i}`));
    cts.forEach((ct, i) => assert.equal(ring.decryptCached(ct, `c${i}`, 0), `secret-${i}`));
    assert.equal(ring.cachedPlaintexts, 1_000);
  });

  it('rejects keys that are not 32 bytes', () => {
    assert.throws(() => Keyring.fromEnv(`k1:${Buffer.alloc(16).toString('base64')}`), /32 bytes/);
    assert.throws(() => Keyring.fromEnv(''), /empty/);
  });
});

describe('tokens', () => {
  it('generates prefixed base62 tokens of the asked length, all different', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateToken('wk_', 40)));
    assert.equal(keys.size, 200);
    for (const k of keys) assert.match(k, /^wk_[0-9A-Za-z]{40}$/);
  });

  it('hashes, compares and hints', () => {
    assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.equal(secretsEqual('a', 'a'), true);
    assert.equal(secretsEqual('a', 'ab'), false);
    assert.equal(hint('wk_abcdef1234'), '1234');
  });

  it('blanks secrets out of a text, raw and as a JSON string holds them', () => {
    const secret = 'sk-"quoted"\\key';
    const text = `raw ${secret} json ${JSON.stringify({ k: secret })} other sk-x`;
    assert.equal(blankSecrets(text, [secret, '']), 'raw [redacted] json {"k":"[redacted]"} other sk-x');
  });
});
