/**
 * The tenant of a request that carries a token instead of an API key (a calendar's feed URL), so it
 * is admitted under that tenant's rate and in-flight limits before it reaches its service, like a
 * request with a key. The route's service says whose token it is (its policy's token_tenant_rpc);
 * an answer is kept for a while per token (its hash), so a feed polled by many subscribers costs
 * one lookup per TTL. A token the service does not know is its 404, never cached.
 */
import { createHash } from 'node:crypto';
import { callerAudience, type Caller, type CallerSigner, type Downstream } from '@workauto/grpc';
import type { Route } from './routes.js';

/** How long a token's tenant is kept. A token never moves to another tenant; a revoked one is refused by its service. */
const TTL_MS = 60_000;
const MAX_ENTRIES = 10_000;

export class TokenTenants {
  private readonly cache = new Map<string, { tenant: Promise<string>; expires: number }>();

  constructor(private readonly signer: CallerSigner) {}

  /** The tenant whose token `request` carries (the route's request fields, `token` among them). */
  tenantOf(route: Route, downstream: Downstream, request: Record<string, unknown>, caller: Caller): Promise<string> {
    const rpc = route.tokenTenant!;
    const key = createHash('sha256')
      .update(`${rpc.grpcPath}\n${String(request.token)}`)
      .digest('base64url');
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.expires > now) return hit.tenant;
    const tenant = downstream
      .call(
        {
          path: rpc.grpcPath,
          requestSerialize: (r: Record<string, unknown>) => Buffer.from(rpc.requestType.encode(r)),
          responseDeserialize: (b: Buffer) => rpc.responseType.decode(b),
        },
        request,
        { metadata: this.signer.metadata(caller, callerAudience(rpc.grpcPath)) },
      )
      .then((answer) => String(answer.tenant_id));
    if (this.cache.size >= MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    // Concurrent requests with the same token share one lookup while it is pending.
    this.cache.set(key, { tenant, expires: now + TTL_MS });
    tenant.catch(() => {
      if (this.cache.get(key)?.tenant === tenant) this.cache.delete(key);
    });
    return tenant;
  }
}
