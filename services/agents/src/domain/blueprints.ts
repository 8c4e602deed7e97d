/**
 * The blueprint registry (in code: a blueprint is a prompt, models and a tool set we ship and test,
 * not tenant data). A tenant configures one with PUT /agent-configs/{blueprint} and runs it.
 */
import type { Domain } from '@workauto/grpc';

export type ProviderName = 'openai' | 'anthropic';

/** The access a tool needs in its domain (the domains of docs/api.md §3): read to list or search, write to create. */
export interface ToolAccess {
  domain: Domain;
  level: 'read' | 'write';
}

export interface Blueprint {
  id: string;
  name: string;
  description: string;
  /** The model each provider runs it with. */
  models: Record<ProviderName, string>;
  /** Whose platform key runs it when the tenant has no key of its own. */
  defaultProvider: ProviderName;
  /** Built-in tools it may call (apps' enabled tools come on top). */
  tools: string[];
  /** The system prompt. */
  prompt: string;
}

const MODELS: Record<ProviderName, string> = { openai: 'gpt-4.1-mini', anthropic: 'claude-haiku-4-5' };

export const BLUEPRINTS: readonly Blueprint[] = [
  {
    id: 'task-triage',
    name: 'Task triage',
    description: 'Reviews open tasks and related notes, and creates follow-up tasks where something is stuck.',
    models: MODELS,
    defaultProvider: 'anthropic',
    tools: ['list_tasks', 'create_task', 'search_notes'],
    prompt:
      "You triage the team's tasks. List the open tasks, look up related notes when useful, and create a " +
      'follow-up task for anything that is overdue or blocked. Finish with a short summary of what you did.',
  },
  {
    id: 'pipeline-review',
    name: 'Pipeline review',
    description: 'Summarises the sales pipeline, writes the summary as a note and creates tasks for stalled deals.',
    models: MODELS,
    defaultProvider: 'anthropic',
    tools: ['list_deals', 'pipeline_summary', 'create_note', 'create_task'],
    prompt:
      'You review the sales pipeline. Read the pipeline summary and the open deals, write a short review as a ' +
      'note, and create a task for each deal that needs attention. Finish with the review.',
  },
  {
    id: 'daily-briefing',
    name: 'Daily briefing',
    description: "Writes a briefing of today's calendar, the open tasks and the open deals as a note.",
    models: MODELS,
    defaultProvider: 'openai',
    tools: ['list_calendar_events', 'list_tasks', 'list_deals', 'create_note'],
    prompt:
      'You write a daily briefing. Look at the calendar events of the next 24 hours, the open tasks and the open deals, and ' +
      'save a concise briefing as a note. Finish with the briefing text.',
  },
];

const byId = new Map(BLUEPRINTS.map((b) => [b.id, b]));

export function findBlueprint(id: string): Blueprint | undefined {
  return byId.get(id);
}

/**
 * What a member needs to start a run whose tools need `accesses`: per domain, the highest level
 * any of them needs (write over read), in the order the domains first appear.
 */
export function accessNeeded(accesses: readonly ToolAccess[]): ToolAccess[] {
  const needed = new Map<Domain, ToolAccess>();
  for (const a of accesses) if (needed.get(a.domain)?.level !== 'write') needed.set(a.domain, a);
  return [...needed.values()];
}
