/**
 * The origin clients reach the API at, for the absolute URLs a response hands out (a calendar's
 * feed_url). PUBLIC_BASE_URL when set; otherwise the request's scheme and Host as the gateway sees
 * them, where X-Forwarded-Proto and X-Forwarded-Host count only from TRUSTED_PROXIES (Express's
 * req.protocol and req.host under `trust proxy`). A request field named `public_base_url` is
 * filled with it by the gateway and never taken from the client.
 */
import type { Request } from 'express';
import { z } from '@workauto/config';
import { parseOrigin } from './cors.js';
import { gatewayErrors } from './errors.js';

/** The request field the gateway fills with the public origin. */
export const PUBLIC_BASE_URL_FIELD = 'public_base_url';

/** The PUBLIC_BASE_URL variable: unset or empty derives the origin from each request; a bad value stops the start. */
export function publicBaseUrlVar() {
  return z
    .string()
    .default('')
    .transform((text, ctx) => {
      if (!text.trim()) return undefined;
      try {
        return parseOrigin(text.trim(), 'https://api.example.com (the origin clients reach the API at)');
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    });
}

/** A Host (or X-Forwarded-Host) value fit for a URL: a name or an address, and a port. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/** The origin of this request's absolute URLs: the configured one, or the request's scheme and Host. */
export function publicBaseUrlOf(req: Request, configured: string | undefined): string {
  if (configured) return configured;
  const host = req.host;
  const scheme = req.protocol;
  if (!host || host.length > 255 || !HOST.test(host) || (scheme !== 'http' && scheme !== 'https'))
    throw gatewayErrors.badRequest(
      [{ field: 'Host', description: 'is missing or not a host name (or the forwarded scheme is not http or https)' }],
      'the request has no usable Host header to build an absolute URL from: send one, or ask the operator to set PUBLIC_BASE_URL',
    );
  return `${scheme}://${host.toLowerCase()}`;
}
