/**
 * Built-in tools: a run acts on its tenant's data through the other services' gRPC APIs, signed as
 * the run's agent (audited with actor_type `agent`, actor_id the run id). Results are the JSON the
 * REST API returns for the same resources, so the model reads what a user of the API would.
 */
import type { CallContext } from '@workauto/grpc';
import { enumMapping } from '@workauto/grpc';
import { parseTimestamp, resourceJson } from '@workauto/protos';
import {
  CrmPipelinesServiceService as Crm,
  DealStatus,
  ListDealsResponse,
  ListPipelinesResponse,
  PipelineSummary,
} from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import {
  NotesTasksServiceService as Notes,
  ListNotesResponse,
  ListTasksResponse,
  Note,
  Task,
  TaskPriority,
} from '@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js';
import {
  CalendarServiceService as Calendar,
  ListEventsResponse,
} from '@workauto/protos/workauto/calendar/v1/calendar.js';
import { accessNeeded, type Blueprint, type ToolAccess } from '../domain/blueprints.js';
import type { ToolSpec } from '../providers/index.js';
import type { ToolClients, ToolService } from './clients.js';

/** The model's arguments are not usable: the model is told (is_error) and may try again. */
export class ToolInputError extends Error {
  override name = 'ToolInputError';
}

export interface BuiltinTool extends ToolSpec {
  service: ToolService;
  /** What a member who starts a run with this tool needs in the tool's domain: read to list, write to create. */
  access: ToolAccess;
  call(args: Record<string, unknown>, ctx: CallContext, clients: ToolClients): Promise<unknown>;
}

const priorities = enumMapping(TaskPriority);
const dealStatuses = enumMapping(DealStatus);

function text(
  args: Record<string, unknown>,
  name: string,
  opts: { required?: boolean; max: number },
): string | undefined {
  const v = args[name];
  if (v === undefined || v === null || v === '') {
    if (opts.required) throw new ToolInputError(`${name} is required`);
    return undefined;
  }
  if (typeof v !== 'string' || v.length > opts.max)
    throw new ToolInputError(`${name} must be text of at most ${opts.max} characters`);
  return v;
}

function limit(args: Record<string, unknown>): number {
  const v = args.limit;
  if (v === undefined || v === null) return 20;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1)
    throw new ToolInputError('limit must be a positive integer');
  return Math.min(v, 50);
}

function oneOf<T extends string>(args: Record<string, unknown>, name: string, values: readonly T[]): T | undefined {
  const v = args[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || !values.includes(v as T))
    throw new ToolInputError(`${name} must be one of ${values.join(', ')}`);
  return v as T;
}

const schema = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

export const BUILTIN_TOOLS: readonly BuiltinTool[] = [
  {
    name: 'list_tasks',
    description: 'Lists the tenant\'s tasks, most recent first. status "open" (default) or "completed".',
    inputSchema: schema({
      status: { type: 'string', enum: ['open', 'completed'] },
      limit: { type: 'integer', minimum: 1, maximum: 50 },
    }),
    service: 'notes_tasks',
    access: { domain: 'tasks', level: 'read' },
    async call(args, ctx, clients) {
      const status = oneOf(args, 'status', ['open', 'completed'] as const) ?? 'open';
      const res = await clients.call(
        'notes_tasks',
        Notes.listTasks,
        { limit: limit(args), completed: status === 'completed' },
        ctx,
      );
      return resourceJson(ListTasksResponse, res);
    },
  },
  {
    name: 'create_task',
    description: 'Creates a task. priority: none, low, medium, high or urgent; due_date as YYYY-MM-DD.',
    inputSchema: schema(
      {
        title: { type: 'string', maxLength: 500 },
        description: { type: 'string' },
        priority: { type: 'string', enum: ['none', 'low', 'medium', 'high', 'urgent'] },
        due_date: { type: 'string', format: 'date' },
      },
      ['title'],
    ),
    service: 'notes_tasks',
    access: { domain: 'tasks', level: 'write' },
    async call(args, ctx, clients) {
      const priority = oneOf(args, 'priority', ['none', 'low', 'medium', 'high', 'urgent'] as const);
      const task = await clients.call(
        'notes_tasks',
        Notes.createTask,
        {
          title: text(args, 'title', { required: true, max: 500 })!,
          description: text(args, 'description', { max: 20_000 }),
          priority: priority ? priorities.fromDomain(priority) : undefined,
          due_date: text(args, 'due_date', { max: 10 }),
        },
        ctx,
      );
      return resourceJson(Task, task);
    },
  },
  {
    name: 'search_notes',
    description: 'Finds notes whose title or body contains the query (case-insensitive), newest first.',
    inputSchema: schema(
      { query: { type: 'string', maxLength: 200 }, limit: { type: 'integer', minimum: 1, maximum: 50 } },
      ['query'],
    ),
    service: 'notes_tasks',
    access: { domain: 'notes', level: 'read' },
    async call(args, ctx, clients) {
      const res = await clients.call(
        'notes_tasks',
        Notes.listNotes,
        { q: text(args, 'query', { required: true, max: 200 }), limit: limit(args) },
        ctx,
      );
      return resourceJson(ListNotesResponse, res);
    },
  },
  {
    name: 'create_note',
    description: 'Writes a note with a title and a body (Markdown).',
    inputSchema: schema({ title: { type: 'string', maxLength: 500 }, body: { type: 'string' } }, ['title', 'body']),
    service: 'notes_tasks',
    access: { domain: 'notes', level: 'write' },
    async call(args, ctx, clients) {
      const note = await clients.call(
        'notes_tasks',
        Notes.createNote,
        {
          title: text(args, 'title', { required: true, max: 500 })!,
          body: text(args, 'body', { required: true, max: 100_000 })!,
        },
        ctx,
      );
      return resourceJson(Note, note);
    },
  },
  {
    name: 'list_deals',
    description: 'Lists deals, newest first. status: open, won or lost; pipeline_id narrows to one pipeline.',
    inputSchema: schema({
      status: { type: 'string', enum: ['open', 'won', 'lost'] },
      pipeline_id: { type: 'string', format: 'uuid' },
      limit: { type: 'integer', minimum: 1, maximum: 50 },
    }),
    service: 'crm_pipelines',
    access: { domain: 'crm', level: 'read' },
    async call(args, ctx, clients) {
      const status = oneOf(args, 'status', ['open', 'won', 'lost'] as const);
      const res = await clients.call(
        'crm_pipelines',
        Crm.listDeals,
        {
          limit: limit(args),
          pipeline_id: text(args, 'pipeline_id', { max: 36 }),
          status: status ? dealStatuses.fromDomain(status) : undefined,
        },
        ctx,
      );
      return resourceJson(ListDealsResponse, res);
    },
  },
  {
    name: 'pipeline_summary',
    description:
      'The summary of a pipeline (deals and value per stage); the default pipeline when pipeline_id is left out.',
    inputSchema: schema({ pipeline_id: { type: 'string', format: 'uuid' } }),
    service: 'crm_pipelines',
    access: { domain: 'crm', level: 'read' },
    async call(args, ctx, clients) {
      let id = text(args, 'pipeline_id', { max: 36 });
      if (!id) {
        const pipelines = await clients.call('crm_pipelines', Crm.listPipelines, { limit: 200 }, ctx);
        const chosen = pipelines.data.find((p) => p.is_default) ?? pipelines.data[0];
        if (!chosen)
          return {
            message: 'the tenant has no pipeline yet',
            pipelines: resourceJson(ListPipelinesResponse, pipelines),
          };
        id = chosen.id;
      }
      const summary = await clients.call('crm_pipelines', Crm.getPipelineSummary, { id }, ctx);
      return resourceJson(PipelineSummary, summary);
    },
  },
  {
    name: 'list_calendar_events',
    description:
      'Lists calendar event occurrences in a window, in start order (default: the next 24 hours; at most 366 days). from and to are RFC 3339 times.',
    inputSchema: schema({
      from: { type: 'string', format: 'date-time' },
      to: { type: 'string', format: 'date-time' },
      limit: { type: 'integer', minimum: 1, maximum: 50 },
    }),
    service: 'calendar',
    access: { domain: 'calendar', level: 'read' },
    async call(args, ctx, clients) {
      const instant = (name: string, fallback: Date) => {
        const v = text(args, name, { max: 64 });
        if (v === undefined) return fallback;
        // The API's one RFC 3339 reader: a time a Timestamp cannot hold (+275760-09-13) is the
        // caller's input error naming the field, never a failure to encode the call.
        const d = parseTimestamp(v);
        if (!d) throw new ToolInputError(`${name} must be an RFC 3339 time like 2026-11-23T09:00:00Z`);
        return d;
      };
      const from = instant('from', new Date());
      const to = instant('to', new Date(from.getTime() + 86_400_000));
      const res = await clients.call('calendar', Calendar.listEvents, { from, to, limit: limit(args) }, ctx);
      return resourceJson(ListEventsResponse, res);
    },
  },
];

const byName = new Map(BUILTIN_TOOLS.map((t) => [t.name, t]));

export function builtinTool(name: string): BuiltinTool | undefined {
  return byName.get(name);
}

/**
 * Refuses arguments the tool's input schema does not declare (every schema says
 * `additionalProperties: false`): a misspelt `titel` would otherwise be dropped and the call
 * succeed without it. Names them and the arguments the tool takes.
 */
export function checkDeclaredArguments(tool: BuiltinTool, args: Record<string, unknown>): void {
  const declared = Object.keys((tool.inputSchema as { properties?: Record<string, unknown> }).properties ?? {});
  const unknown = Object.keys(args).filter((name) => !declared.includes(name));
  if (unknown.length)
    throw new ToolInputError(
      `${tool.name} does not take the argument${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ` +
        (declared.length ? `its arguments are ${declared.join(', ')}` : 'it takes no arguments'),
    );
}

/** What a member needs, domain by domain, to start a run of the blueprint: what its built-in tools need. */
export function accessToStart(blueprint: Blueprint): ToolAccess[] {
  return accessNeeded(blueprint.tools.flatMap((name) => builtinTool(name)?.access ?? []));
}
