/**
 * The origin clients reach the API at, for the absolute URLs a response hands out (a calendar's
 * feed_url). PUBLIC_BASE_URL when set; otherwise the request's scheme and Host as the gateway sees
 * them, where X-Forwarded-Proto and X-Forwarded-Host count only from TRUSTED_PROXIES (Express's
 * req.protocol and req.host under `trust proxy`). A request field named `public_base_url` is
 * filled with it by the gateway and never taken from the client.
 */
// main.ts reads PUBLIC_BASE_URL through this module before telemetry starts: nothing imported here
// may load grpc, http or pg, or their calls would go untraced (publicBaseUrlOf lives in proxy.ts).
import { z } from '@workauto/config';
import { parseOrigin } from './cors.js';

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
