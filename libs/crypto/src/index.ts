import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 text (rejection sampling: no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** An opaque secret with a recognisable prefix: `wk_` API keys, `inv_` invitation codes, … */
export function generateToken(prefix: string, length = 40): string {
  return `${prefix}${randomBase62(length)}`;
}

/** Tokens are stored only as this hash; a lookup hashes the presented token the same way. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** Constant-time comparison of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** What responses show of a secret: its last 4 characters. */
export function hint(secret: string): string {
  return secret.slice(-4);
}

/** What stands where a secret was blanked out of a text. */
export const REDACTED = '[redacted]';

/**
 * The text with every secret blanked out, as it is and as it appears inside a JSON string (a
 * server or a model may echo what it was sent, raw or serialised).
 */
export function blankSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (!secret) continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    for (const form of escaped === secret ? [secret] : [secret, escaped]) out = out.split(form).join(REDACTED);
  }
  return out;
}

export class KeyringError extends Error {
  override name = 'KeyringError';
}

/**
 * How long decryptCached keeps a plaintext. It does not lengthen a removed key's life: the keyring
 * is read at start, so a running process decrypts with a key taken out of ENCRYPTION_KEYS until it
 * restarts anyway.
 */
const DECRYPTED_KEPT_MS = 5 * 60_000;
/** The most plaintexts decryptCached keeps (one per endpoint secret or provider key in use). */
const DECRYPTED_KEPT_MAX = 1_000;

/**
 * AES-256-GCM envelope encryption with a keyring.
 *
 * Each secret gets a fresh data key; the data key is wrapped by the keyring's active key. The
 * ciphertext names the key id that wrapped it, so old keys keep decrypting after rotation while
 * new writes use the active key (as Rails' and Vault transit's keyrings do). The caller passes a
 * context (e.g. `integration_key:<tenant>:<provider>`) bound as additional authenticated data, so
 * a ciphertext copied to another row does not decrypt.
 *
 * Format: `wk1.<key id>.<base64url wrapped data key>.<base64url iv|ciphertext|tag>`.
 */
export class Keyring {
  readonly activeKeyId: string;
  private readonly keys: Map<string, Buffer>;
  /** decryptCached's plaintexts by context and ciphertext, oldest first. */
  private readonly recent = new Map<string, { plaintext: string; until: number }>();

  constructor(keys: Map<string, Buffer>, activeKeyId: string) {
    if (!keys.has(activeKeyId)) throw new KeyringError(`active key ${activeKeyId} is not in the keyring`);
    for (const [id, key] of keys) {
      if (key.length !== 32) throw new KeyringError(`key ${id} must be 32 bytes (base64 of 32 random bytes)`);
      if (!/^[A-Za-z0-9_-]+$/.test(id)) throw new KeyringError(`key id ${id} may use only letters, digits, _ and -`);
    }
    this.keys = keys;
    this.activeKeyId = activeKeyId;
  }

  /**
   * Parses `ENCRYPTION_KEYS`: comma-separated `id:base64key` entries; the first is active.
   * Example: `k2:<new>,k1:<old>` encrypts with k2 and still decrypts k1's ciphertexts.
   */
  static fromEnv(spec: string): Keyring {
    const keys = new Map<string, Buffer>();
    let active: string | undefined;
    for (const entry of spec
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const sep = entry.indexOf(':');
      if (sep < 1) throw new KeyringError('ENCRYPTION_KEYS entries must look like id:base64key');
      const id = entry.slice(0, sep);
      keys.set(id, Buffer.from(entry.slice(sep + 1), 'base64'));
      active ??= id;
    }
    if (!active) throw new KeyringError('ENCRYPTION_KEYS is empty');
    return new Keyring(keys, active);
  }

  /** A fresh single-key keyring spec, for `make dev` and tests. */
  static generateSpec(id = 'k1'): string {
    return `${id}:${randomBytes(32).toString('base64')}`;
  }

  encrypt(plaintext: string, context: string): string {
    const dataKey = randomBytes(32);
    const wrapped = seal(this.keys.get(this.activeKeyId)!, dataKey, `wrap:${context}`);
    const body = seal(dataKey, Buffer.from(plaintext, 'utf8'), context);
    return ['wk1', this.activeKeyId, wrapped.toString('base64url'), body.toString('base64url')].join('.');
  }

  decrypt(ciphertext: string, context: string): string {
    const [version, keyId, wrapped, body] = ciphertext.split('.');
    if (version !== 'wk1' || !keyId || !wrapped || !body) throw new KeyringError('not a wk1 ciphertext');
    const kek = this.keys.get(keyId);
    if (!kek) throw new KeyringError(`ciphertext was written with key ${keyId}, which is not in ENCRYPTION_KEYS`);
    const dataKey = open(kek, Buffer.from(wrapped, 'base64url'), `wrap:${context}`);
    return open(dataKey, Buffer.from(body, 'base64url'), context).toString('utf8');
  }

  /**
   * decrypt, with the plaintext kept for a few minutes (DECRYPTED_KEPT_MS) by context and
   * ciphertext, for secrets opened on every call of a hot path: a webhook endpoint's signing secret
   * per delivery, a tenant's provider key per agent run. Each decrypt makes two AES-GCM deciphers,
   * 30–70 µs of CPU (10 % of a webhooks replica's at 1,400 deliveries/s, docs/benchmarks.md). A
   * secret set again is a new ciphertext, so it is never answered from an old entry; an entry is
   * found only with the context it was opened with, so a ciphertext moved to another row still
   * fails. At most DECRYPTED_KEPT_MAX entries, the oldest dropped first. `now` is for tests.
   */
  decryptCached(ciphertext: string, context: string, now = Date.now()): string {
    const id = `${context}\u0000${ciphertext}`;
    const kept = this.recent.get(id);
    if (kept && now < kept.until) return kept.plaintext;
    const plaintext = this.decrypt(ciphertext, context);
    this.recent.delete(id); // re-inserted last: the map's order is the order of decrypting
    if (this.recent.size >= DECRYPTED_KEPT_MAX) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(id, { plaintext, until: now + DECRYPTED_KEPT_MS });
    return plaintext;
  }

  /** How many plaintexts decryptCached keeps now. */
  get cachedPlaintexts(): number {
    return this.recent.size;
  }

  /**
   * A keyring of keys derived from this one's for one purpose (`info`, HKDF-SHA256): same ids, same
   * active key, as an ENCRYPTION_KEYS value (Keyring.fromEnv reads it). Whoever holds it can seal
   * and open what belongs to that purpose only, never this keyring's other secrets.
   */
  derive(info: string): string {
    const derived = (id: string) =>
      Buffer.from(hkdfSync('sha256', this.keys.get(id)!, Buffer.alloc(0), info, 32)).toString('base64');
    const ids = [this.activeKeyId, ...[...this.keys.keys()].filter((id) => id !== this.activeKeyId)];
    return ids.map((id) => `${id}:${derived(id)}`).join(',');
  }

  /** The key id a ciphertext was written with (recorded beside it as key_version). */
  static keyIdOf(ciphertext: string): string {
    return ciphertext.split('.')[1] ?? '';
  }
}

function seal(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, ct, cipher.getAuthTag()]);
}

function open(key: Buffer, sealed: Buffer, aad: string): Buffer {
  if (sealed.length < 28) throw new KeyringError('ciphertext is truncated');
  const iv = sealed.subarray(0, 12);
  const tag = sealed.subarray(sealed.length - 16);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]);
  } catch {
    throw new KeyringError('ciphertext does not authenticate (wrong key, wrong context, or tampered)');
  }
}
