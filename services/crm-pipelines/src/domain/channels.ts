/**
 * Canonical values of contact channels: the form uniqueness is checked on. KEY_VERSION names this
 * set of rules; a change to them bumps it, so stored values can be recomputed and told apart.
 */
import { isSupportedCountry, parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';

export const KEY_VERSION = 1;
export type ChannelType = 'email' | 'phone' | 'url' | 'linkedin' | 'other';

// Deliberately loose, as most APIs are: one @, no spaces, a dot in the domain.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export type Canonical =
  { ok: true; canonical: string; keyVersion: number } | { ok: false; field: string; description: string };

const fail = (field: string, description: string): Canonical => ({ ok: false, field, description });
const ok = (canonical: string): Canonical => ({ ok: true, canonical, keyVersion: KEY_VERSION });

/**
 * email → trimmed and lowercased; phone → E.164 (national numbers need `region`, ISO 3166 alpha-2);
 * url → http(s) URL with its host lowercased (WHATWG serialisation); linkedin → lowercased without
 * scheme, `www.` and trailing slash; other → trimmed.
 */
export function canonicalize(type: ChannelType, value: string, region?: string): Canonical {
  const v = value.trim();
  if (!v) return fail('value', 'is required');
  switch (type) {
    case 'email': {
      if (v.length > 320 || !EMAIL.test(v)) return fail('value', 'must be an email address like name@example.com');
      return ok(v.toLowerCase());
    }
    case 'phone': {
      let country: CountryCode | undefined;
      if (region !== undefined && region !== '') {
        const upper = region.trim().toUpperCase();
        if (!/^[A-Z]{2}$/.test(upper) || !isSupportedCountry(upper))
          return fail('region', 'must be an ISO 3166-1 alpha-2 region code like US or GB');
        country = upper;
      } else if (!v.startsWith('+')) {
        return fail('value', 'must be in international form (+14155550123), or give region for a national number');
      }
      const phone = parsePhoneNumberFromString(v, country ? { defaultCountry: country } : undefined);
      if (!phone || !phone.isValid()) return fail('value', 'is not a valid phone number');
      return ok(phone.number);
    }
    case 'url': {
      let url: URL;
      try {
        url = new URL(v);
      } catch {
        return fail('value', 'must be an absolute http(s) URL');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return fail('value', 'must be an absolute http(s) URL');
      return ok(url.href);
    }
    case 'linkedin': {
      const canonical = v
        .toLowerCase()
        .replace(/^https?:\/\//, '')
        .replace(/^www\./, '')
        .replace(/\/+$/, '');
      return canonical ? ok(canonical) : fail('value', 'must be a LinkedIn profile URL or handle');
    }
    case 'other':
      return ok(v);
  }
}
