import * as grpc from '@grpc/grpc-js';
import { errors } from './errors.js';

/** Metadata the gateway sets on every call and services pass on to the services they call. */
export const MetadataKeys = {
  requestId: 'x-request-id',
  tenantId: 'x-tenant-id',
  actorType: 'x-actor-type',
  actorId: 'x-actor-id',
  memberId: 'x-member-id',
  clientIp: 'x-client-ip',
  userAgent: 'x-user-agent',
  /** The client's Idempotency-Key of a POST (the gateway stores the response; services may dedupe on it). */
  idempotencyKey: 'x-idempotency-key',
} as const;

export interface Actor {
  /** member, api_key, platform_admin or system */
  type: string;
  id: string;
  memberId?: string;
}

/** Who is calling, for which tenant, and until when: read once from the call's metadata. */
export class CallContext {
  constructor(
    readonly requestId: string,
    readonly tenantId: string | undefined,
    readonly actor: Actor | undefined,
    readonly clientIp: string | undefined,
    readonly userAgent: string | undefined,
    /** Aborts when the client cancels or the deadline passes: pass it to long work. */
    readonly signal: AbortSignal,
  ) {}

  static fromMetadata(md: grpc.Metadata, signal: AbortSignal): CallContext {
    const get = (k: string) => {
      const v = md.get(k)[0];
      return typeof v === 'string' && v !== '' ? v : undefined;
    };
    const actorType = get(MetadataKeys.actorType);
    const actorId = get(MetadataKeys.actorId);
    const memberId = get(MetadataKeys.memberId);
    return new CallContext(
      get(MetadataKeys.requestId) ?? crypto.randomUUID(),
      get(MetadataKeys.tenantId),
      actorType && actorId ? { type: actorType, id: actorId, ...(memberId ? { memberId } : {}) } : undefined,
      get(MetadataKeys.clientIp),
      get(MetadataKeys.userAgent),
      signal,
    );
  }

  /** The tenant every query of a tenant-scoped rpc is filtered by; a call without one is refused. */
  get tenant(): string {
    if (!this.tenantId) throw errors.unauthenticated('TENANT_REQUIRED', 'this call needs a tenant credential');
    return this.tenantId;
  }

  /** Metadata for a call this service makes on the caller's behalf. */
  toMetadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set(MetadataKeys.requestId, this.requestId);
    if (this.tenantId) md.set(MetadataKeys.tenantId, this.tenantId);
    if (this.actor) {
      md.set(MetadataKeys.actorType, this.actor.type);
      md.set(MetadataKeys.actorId, this.actor.id);
      if (this.actor.memberId) md.set(MetadataKeys.memberId, this.actor.memberId);
    }
    if (this.clientIp) md.set(MetadataKeys.clientIp, this.clientIp);
    if (this.userAgent) md.set(MetadataKeys.userAgent, this.userAgent);
    return md;
  }
}
