import type * as grpc from '@grpc/grpc-js';
import type { Caller, CallerSigner } from './caller-identity.js';
import { allows, type AccessLevel, type AccessLevels, type Domain } from './access.js';
import { errors } from './errors.js';

export interface Actor {
  /** member, api_key, platform_admin or system */
  type: string;
  id: string;
  memberId?: string;
  /**
   * The member's effective access levels, as the gateway resolved them (signed with the rest).
   * Unset for callers that are not a tenant's member (the platform, a service acting for a
   * scheduled run).
   */
  access?: AccessLevels;
}

/** Who is calling, for which tenant, and until when: built by the server only from a verified caller token. */
export class CallContext {
  constructor(
    readonly requestId: string,
    readonly tenantId: string | undefined,
    readonly actor: Actor | undefined,
    readonly clientIp: string | undefined,
    readonly userAgent: string | undefined,
    /** The signal, or what makes it when first read (the gRPC server: most handlers never read it). */
    signal: AbortSignal | (() => AbortSignal),
    /** This service's own caller signing key (CALLER_SIGNING_KEY), when it has one. */
    private readonly signer?: CallerSigner,
    /** The client's Idempotency-Key of a write (the gRPC kit records it with the write: server.ts). */
    readonly idempotencyKey?: string,
    /** The keys that seal the response stored for that key (Caller.idempotencySeal). */
    readonly idempotencySeal?: string,
    /** When the caller stops waiting (epoch ms; the call's gRPC deadline), if it set one. */
    readonly deadline?: number,
  ) {
    this.lazySignal = signal;
  }

  private lazySignal: AbortSignal | (() => AbortSignal);

  /** Aborts when the client cancels or the deadline passes: pass it to long work. */
  get signal(): AbortSignal {
    if (typeof this.lazySignal === 'function') this.lazySignal = this.lazySignal();
    return this.lazySignal;
  }

  static fromCaller(
    caller: Caller,
    signal: AbortSignal | (() => AbortSignal),
    signer?: CallerSigner,
    deadline?: number,
  ): CallContext {
    return new CallContext(
      caller.requestId,
      caller.tenantId,
      caller.actor,
      caller.clientIp,
      caller.userAgent,
      signal,
      signer,
      caller.idempotencyKey,
      caller.idempotencySeal,
      deadline,
    );
  }

  /**
   * Whether the caller may act at `need` in `domain` (docs/api.md §3), for rules beyond the route's own
   * policy, which the gateway has already checked. A caller without signed access levels (not a
   * member: a service acting for a scheduled run) is not restricted here.
   */
  allows(domain: Domain, need: AccessLevel): boolean {
    return allows(this.actor?.access, domain, need);
  }

  /** The caller's level in `domain` (`admin` for a caller without signed access levels, as allows() reads it). */
  level(domain: Domain): AccessLevel {
    const access = this.actor?.access;
    return access === undefined ? 'admin' : (access[domain] ?? 'none');
  }

  /** The tenant every query of a tenant-scoped rpc is filtered by; a call without one is refused. */
  get tenant(): string {
    if (!this.tenantId) throw errors.unauthenticated('TENANT_REQUIRED', 'this call needs a tenant credential');
    return this.tenantId;
  }

  /**
   * Metadata for a call this service makes on the caller's behalf to `service` (the target's full
   * gRPC service name, e.g. workauto.notes_tasks.v1.NotesTasksService): the same caller, signed with
   * this service's own key. The caller's token is not forwarded: it names this service as its
   * audience, so the target would refuse it. The target must list this service's public key in its
   * CALLER_VERIFY_KEYS. The Idempotency-Key stays with this call: a call made on its behalf is
   * another request, which the key does not name (two such calls would otherwise share it).
   */
  toMetadata(service: string): grpc.Metadata {
    if (!this.signer) {
      throw new Error(
        "this service has no caller signing key: set CALLER_SIGNING_KEY (and add its public key to CALLER_VERIFY_KEYS of the services it calls) to call other services on a caller's behalf",
      );
    }
    return this.signer.metadata(
      {
        requestId: this.requestId,
        tenantId: this.tenantId,
        actor: this.actor,
        clientIp: this.clientIp,
        userAgent: this.userAgent,
      },
      service,
    );
  }
}
