// A module of its own so main.ts validates TRUSTED_PROXIES before telemetry loads app.ts.
import { isIP } from 'node:net';

/** `10.0.0.0/8`, `fd00::/8` or a bare address: what TRUSTED_PROXIES takes. */
export function isCidr(text: string): boolean {
  const [address, prefix, extra] = text.split('/');
  const family = isIP(address ?? '');
  if (!family || extra !== undefined) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}
