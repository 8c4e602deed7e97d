import * as client from 'openid-client';
import { z } from '@workauto/config';

/** One identity provider, by OIDC discovery (issuer) or by explicit OAuth 2.0 endpoints. */
export const providerSchema = z
  .object({
    issuer: z.url().optional(),
    authorization_endpoint: z.url().optional(),
    token_endpoint: z.url().optional(),
    client_id: z.string().min(1),
    client_secret: z.string().min(1),
    scopes: z.array(z.string()).default(['openid', 'email', 'profile']),
  })
  .refine(
    (p) => p.issuer || (p.authorization_endpoint && p.token_endpoint),
    'give issuer, or authorization_endpoint and token_endpoint',
  );
export type ProviderConfig = z.infer<typeof providerSchema>;

export interface OAuthSettings {
  /** name → provider, e.g. {"google": {"issuer": "https://accounts.google.com", …}} (env OAUTH_PROVIDERS). */
  providers: Record<string, ProviderConfig>;
  /** Public base URL of the gateway; the callback is <base>/api/v1/oauth/<idp>/callback. */
  redirectBaseUrl: string;
  /** Origins return_to may point at (no open redirect). */
  allowedReturnOrigins: string[];
}

/**
 * Whether a failed call to a provider is an outage (unreachable, timed out, HTTP 5xx) rather than
 * a judgement (an OAuth error such as invalid_grant, a bad id_token): an outage is worth a retry.
 */
export function isProviderOutage(err: unknown): boolean {
  if (err instanceof client.ClientError) return err.cause instanceof Response && err.cause.status >= 500;
  if (err instanceof DOMException) return err.name === 'TimeoutError' || err.name === 'AbortError';
  return err instanceof TypeError; // fetch's network failure ("fetch failed")
}

/** Plain http is accepted only for loopback issuers (local development and tests). */
function isLoopback(url: URL): boolean {
  return url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

/**
 * The configured identity providers, each resolved once into an openid-client Configuration
 * (discovery is a network call, so it happens on first use, not at start-up).
 */
export class OAuthProviders {
  private readonly resolved = new Map<string, Promise<client.Configuration>>();

  constructor(readonly settings: OAuthSettings) {}

  has(idp: string): boolean {
    return Object.hasOwn(this.settings.providers, idp);
  }

  provider(idp: string): ProviderConfig {
    return this.settings.providers[idp]!;
  }

  redirectUri(idp: string): string {
    return `${this.settings.redirectBaseUrl.replace(/\/$/, '')}/api/v1/oauth/${idp}/callback`;
  }

  configuration(idp: string): Promise<client.Configuration> {
    let config = this.resolved.get(idp);
    if (!config) {
      config = this.resolve(this.provider(idp));
      config.catch(() => this.resolved.delete(idp)); // a failed discovery is retried next time
      this.resolved.set(idp, config);
    }
    return config;
  }

  private async resolve(p: ProviderConfig): Promise<client.Configuration> {
    const auth = client.ClientSecretPost(p.client_secret);
    if (p.issuer) {
      const issuer = new URL(p.issuer);
      return client.discovery(
        issuer,
        p.client_id,
        undefined,
        auth,
        // openid-client marks allowInsecureRequests deprecated only so it stands out; it has no successor.
        // Plain HTTP is allowed for a provider on loopback only (a development or test provider).
        // eslint-disable-next-line @typescript-eslint/no-deprecated
        isLoopback(issuer) ? { execute: [client.allowInsecureRequests] } : undefined,
      );
    }
    const config = new client.Configuration(
      {
        issuer: new URL(p.authorization_endpoint!).origin,
        authorization_endpoint: p.authorization_endpoint!,
        token_endpoint: p.token_endpoint!,
      },
      p.client_id,
      undefined,
      auth,
    );
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- loopback only, as above
    if (isLoopback(new URL(p.token_endpoint!))) client.allowInsecureRequests(config);
    return config;
  }
}
