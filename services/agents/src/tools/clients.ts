import { CallContext, CallerSigner, Downstream, type UnaryMethod } from '@workauto/grpc';

/** The services whose tools a run calls, keyed like the gateway's downstreams. */
export type ToolService = 'notes_tasks' | 'crm_pipelines' | 'calendar' | 'apps';

/** Full gRPC service names: the audience of each call's signed caller identity. */
const GRPC_SERVICE: Record<ToolService, string> = {
  notes_tasks: 'workauto.notes_tasks.v1.NotesTasksService',
  crm_pipelines: 'workauto.crm_pipelines.v1.CrmPipelinesService',
  calendar: 'workauto.calendar.v1.CalendarService',
  apps: 'workauto.apps.v1.AppsService',
};

/** Who a run acts as: actor type `agent`, actor id the run's id (the audit log shows it so). */
export function agentContext(tenantId: string, runId: string, signal: AbortSignal, signer?: CallerSigner): CallContext {
  return new CallContext(runId, tenantId, { type: 'agent', id: runId }, undefined, undefined, signal, signer);
}

/** Connections to the services runs call, each call signed as the run's agent with this service's own key. */
export class ToolClients {
  private readonly downstreams = new Map<ToolService, Downstream>();

  constructor(
    addresses: Partial<Record<ToolService, string>>,
    private readonly deadlineMs = 30_000,
  ) {
    for (const [service, address] of Object.entries(addresses) as [ToolService, string | undefined][]) {
      if (address) this.downstreams.set(service, new Downstream(service, address, { deadlineMs }));
    }
  }

  has(service: ToolService): boolean {
    return this.downstreams.has(service);
  }

  /** One call as the run's agent; aborts in flight with the run's signal. */
  call<Req, Res>(service: ToolService, method: UnaryMethod<Req, Res>, request: Req, ctx: CallContext): Promise<Res> {
    const downstream = this.downstreams.get(service);
    if (!downstream)
      throw new ToolUnavailable(
        `${service.replace('_', '-')} is not configured for agent runs (set its address, e.g. ${service.toUpperCase()}_ADDR)`,
      );
    return downstream.call(method, request, {
      metadata: ctx.toMetadata(GRPC_SERVICE[service]),
      signal: ctx.signal,
      deadlineMs: this.deadlineMs,
      tenant: ctx.tenantId,
    });
  }

  close(): void {
    for (const d of this.downstreams.values()) d.close();
  }
}

/** A tool's service cannot be reached or is not configured: the run fails (tool_error / app_unavailable). */
export class ToolUnavailable extends Error {
  override name = 'ToolUnavailable';
}
