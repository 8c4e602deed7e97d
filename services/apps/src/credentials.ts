import { Keyring, hint } from '@workauto/crypto';
import { authHeaders, type AuthInput } from './domain/auth.js';
import type { AppRow } from './repo/apps.js';

/**
 * An app's credential: sealed for storage when it is set (create, rotate) and opened only to talk
 * to the app's MCP server (a probe, a tool call). Encrypted under the app's own context, so a
 * ciphertext copied to another app or tenant does not decrypt.
 */

const secretContext = (tenantId: string, appId: string) => `app_auth:${tenantId}:${appId}`;

/** The stored form of a credential for one app: ciphertext, key id and hint (nothing for none). */
export function sealed(keyring: Keyring, tenantId: string, appId: string, auth: AuthInput) {
  if (!auth.secret) return { auth_ciphertext: null, auth_key_id: null, auth_hint: null };
  const ciphertext = keyring.encrypt(auth.secret, secretContext(tenantId, appId));
  return { auth_ciphertext: ciphertext, auth_key_id: Keyring.keyIdOf(ciphertext), auth_hint: hint(auth.secret) };
}

/** The session options of an app: its URL and its decrypted credential (the secrets to keep out of errors). */
export function sessionTarget(
  keyring: Keyring,
  app: AppRow,
): { url: string; headers: Record<string, string>; secrets: string[] } {
  const secret = app.auth_ciphertext
    ? keyring.decrypt(app.auth_ciphertext, secretContext(app.tenant_id, app.id))
    : null;
  return {
    url: app.mcp_server_url,
    headers: authHeaders(app.auth_type, secret, app.auth_header_name),
    secrets: secret ? [secret] : [],
  };
}
