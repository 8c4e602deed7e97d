/**
 * One run's loop: the blueprint's prompt and the run's input go to the provider with the tools the
 * guardrails allow; each tool call is made as the run's agent and its result goes back; the loop
 * ends at a final answer or after MAX_STEPS provider calls. Budget and deadline are enforced inside
 * the loop (after every provider call, and the deadline also aborts a call in flight), so a run
 * stops as soon as it passes either. Every stop is an Outcome with the output so far.
 */
import type { AccessLevels, CallContext } from '@workauto/grpc';
import { allows, decodeStatusDetails } from '@workauto/grpc';
import type { Blueprint, ProviderName, ToolAccess } from '../domain/blueprints.js';
import { costMicroCents, toCents } from '../domain/costs.js';
import {
  blockPatterns,
  blockedBy,
  maxOutputChars,
  maxToolCalls,
  toolAllowed,
  type Guardrail,
} from '../domain/guardrails.js';
import {
  ProviderError,
  runFailureCategory,
  type ChatMessage,
  type ProviderErrorCategory,
  type Providers,
  type ToolResult,
  type ToolSpec,
} from '../providers/index.js';
import { builtinTool, ToolInputError, type BuiltinTool } from '../tools/builtin.js';
import { ToolUnavailable, type ToolClients } from '../tools/clients.js';
import { APP_TOOL_ACCESS, callAppTool, listAppTools, type AppTool } from '../tools/apps.js';

export const MAX_STEPS = 20;
const MAX_OUTPUT_TOKENS = 1_024;
const TOOL_RESULT_MAX_CHARS = 20_000;

export type FailureCategory =
  | 'provider_auth'
  | 'provider_quota'
  | 'provider_rate_limited'
  | 'provider_unavailable'
  | 'budget_exceeded'
  | 'deadline_exceeded'
  | 'tool_error'
  | 'app_unavailable'
  | 'guardrail_blocked'
  | 'worker_lost'
  | 'internal';

export interface RunOutput {
  text: string;
  /** Provider calls made. */
  steps: number;
  tool_calls: { name: string; is_error: boolean }[];
}

export type Outcome =
  | { status: 'succeeded'; output: RunOutput; costMicroCents: number }
  | {
      status: 'failed';
      category: FailureCategory;
      detail: string;
      output: RunOutput;
      costMicroCents: number;
      /** When the provider refused the key: what byok_status becomes. */
      providerCategory?: ProviderErrorCategory;
    }
  /** Stopped from outside (cancel, lease lost, shutdown): the worker decides what to write. */
  | { status: 'stopped'; reason: RunStop; output: RunOutput; costMicroCents: number };

/** Why a run's signal aborted: the worker's reasons, and the deadline's. */
export class RunStop extends Error {
  override name = 'RunStop';
  constructor(readonly kind: 'cancelled' | 'released' | 'deadline') {
    super(
      kind === 'cancelled'
        ? 'the run was cancelled'
        : kind === 'released'
          ? 'the worker released the run'
          : 'the run passed its deadline',
    );
  }
}

/** A tool the run may offer the model: a built-in one or an app's, with the access it needs. */
type OfferedTool = { spec: ToolSpec; access: ToolAccess } & (
  { builtin: BuiltinTool; app?: undefined } | { app: AppTool; builtin?: undefined }
);

export interface Execution {
  blueprint: Blueprint;
  input: unknown;
  guardrails: Guardrail[];
  /** The access levels of the member who started the run; undefined: not restricted (a scheduled run). */
  starterAccess: AccessLevels | undefined;
  provider: ProviderName;
  apiKey: string;
  budgetCents: number | null;
  deadlineAt: Date | null;
  /** What earlier attempts of the run already cost (a re-run after a lost worker); counts against the budget. */
  spentMicroCents: number;
  /** Aborts on cancel, lease loss or shutdown (with a RunStop). */
  signal: AbortSignal;
  /** The run acting as its agent, for tool calls that abort with `signal`. */
  actAs(signal: AbortSignal): CallContext;
  /** Called after each provider call with the cost and output so far (the worker persists them). */
  progress(costMicroCents: number, output: RunOutput): Promise<void>;
}

export interface ExecutorDeps {
  providers: Providers;
  clients: ToolClients;
  warn?(fields: object, message: string): void;
}

/** The run's first message: its input as text. */
function inputText(input: unknown): string {
  if (typeof input === 'string' && input.trim()) return input;
  if (input === null || input === undefined) return 'Run now.';
  return `Input (JSON): ${JSON.stringify(input)}`;
}

/** The tools the run offers (built-in and apps' its starter may use, filtered by the guardrails), and every tool name it knows. */
async function toolsFor(
  deps: ExecutorDeps,
  run: Execution,
  ctx: CallContext,
): Promise<{ offered: OfferedTool[]; known: Set<string> }> {
  // A built-in tool whose service this deployment does not reach is not offered.
  const builtins: OfferedTool[] = run.blueprint.tools.flatMap((name) => {
    const builtin = builtinTool(name);
    return builtin && deps.clients.has(builtin.service)
      ? [
          {
            spec: { name: builtin.name, description: builtin.description, inputSchema: builtin.inputSchema },
            access: builtin.access,
            builtin,
          },
        ]
      : [];
  });
  let apps: OfferedTool[] = [];
  try {
    apps = (await listAppTools(deps.clients, ctx)).map((app) => ({ spec: app.spec, access: APP_TOOL_ACCESS, app }));
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    // The apps service being away does not stop a run that may not need an app: it runs without them.
    deps.warn?.({ err }, "could not list the tenant's app tools; the run goes on with the built-in tools only");
  }
  // A run acts within its starter's access: a tool its starter may not use is neither offered nor known.
  const all = [...builtins, ...apps].filter((t) => allows(run.starterAccess, t.access.domain, t.access.level));
  return {
    offered: all.filter((t) => toolAllowed(run.guardrails, t.spec.name)),
    known: new Set(all.map((t) => t.spec.name)),
  };
}

export async function execute(deps: ExecutorDeps, run: Execution): Promise<Outcome> {
  const output: RunOutput = { text: '', steps: 0, tool_calls: [] };
  let cost = run.spentMicroCents;
  const deadline = new AbortController();
  const timer = run.deadlineAt
    ? setTimeout(() => deadline.abort(new RunStop('deadline')), Math.max(0, run.deadlineAt.getTime() - Date.now()))
    : undefined;
  const signal = AbortSignal.any([run.signal, deadline.signal]);
  const ctx = run.actAs(signal);
  const fail = (category: FailureCategory, detail: string, providerCategory?: ProviderErrorCategory): Outcome => ({
    status: 'failed',
    category,
    detail,
    output,
    costMicroCents: cost,
    ...(providerCategory ? { providerCategory } : {}),
  });
  const toolCallCap = maxToolCalls(run.guardrails);
  const blocking = blockPatterns(run.guardrails);
  if ('error' in blocking) {
    // Fail closed before any provider call: a pattern meant to hold answers back cannot be skipped.
    clearTimeout(timer);
    return fail(
      'guardrail_blocked',
      `guardrails[${blocking.index}].pattern ${blocking.error}. Change the pattern with PUT /agent-configs/${run.blueprint.id}; no run of this blueprint can start until then`,
    );
  }
  const messages: ChatMessage[] = [{ role: 'user', text: inputText(run.input) }];
  const model = run.blueprint.models[run.provider];
  try {
    const { offered, known } = await toolsFor(deps, run, ctx);
    const byName = new Map(offered.map((t) => [t.spec.name, t]));
    for (let step = 1; step <= MAX_STEPS; step++) {
      const answer = await deps.providers[run.provider].chat(
        {
          apiKey: run.apiKey,
          model,
          system: run.blueprint.prompt,
          messages,
          tools: offered.map((t) => t.spec),
          maxOutputTokens: MAX_OUTPUT_TOKENS,
        },
        signal,
      );
      output.steps = step;
      cost += costMicroCents(model, answer.usage);
      if (answer.text) output.text = answer.text;
      await run.progress(cost, output);
      if (run.budgetCents !== null && toCents(cost) > run.budgetCents) {
        return fail(
          'budget_exceeded',
          `the run cost ${toCents(cost)} cents after ${step} provider calls, more than its budget of ${run.budgetCents} cents; raise budget_usd_cents to let it finish`,
        );
      }
      if (run.deadlineAt && Date.now() > run.deadlineAt.getTime()) throw new RunStop('deadline');
      if (answer.toolCalls.length === 0) {
        const blocked = blockedBy(blocking.patterns, answer.text);
        if (blocked !== undefined) {
          output.text = ''; // what the pattern blocks is not shown either
          return fail(
            'guardrail_blocked',
            `the answer matches the block_pattern of guardrails[${blocked}] and was withheld`,
          );
        }
        const cap = maxOutputChars(run.guardrails);
        if (cap !== undefined && output.text.length > cap) output.text = output.text.slice(0, cap);
        return { status: 'succeeded', output, costMicroCents: cost };
      }
      const results: ToolResult[] = [];
      for (const call of answer.toolCalls) {
        if (toolCallCap !== undefined && output.tool_calls.length >= toolCallCap) {
          return fail('guardrail_blocked', `the model asked for more than ${toolCallCap} tool calls (max_tool_calls)`);
        }
        const tool = byName.get(call.name);
        if (!tool) {
          if (known.has(call.name)) {
            return fail(
              'guardrail_blocked',
              `the model called ${call.name}, which the guardrails do not allow (allow_tools / deny_tools)`,
            );
          }
          output.tool_calls.push({ name: call.name, is_error: true });
          results.push({
            callId: call.id,
            name: call.name,
            content: `unknown tool ${call.name}; use one of: ${[...byName.keys()].join(', ')}`,
            isError: true,
          });
          continue;
        }
        const result = await callTool(deps, tool, call.arguments, ctx);
        if ('failure' in result) return fail(result.failure, result.detail);
        output.tool_calls.push({ name: call.name, is_error: result.isError });
        results.push({ callId: call.id, name: call.name, content: result.content, isError: result.isError });
      }
      messages.push({ role: 'assistant', text: answer.text, toolCalls: answer.toolCalls }, { role: 'tool', results });
    }
    return fail('internal', `the model did not give a final answer within ${MAX_STEPS} provider calls`);
  } catch (err) {
    const reason = signal.aborted && signal.reason instanceof RunStop ? signal.reason : err;
    if (reason instanceof RunStop) {
      if (reason.kind === 'deadline')
        return fail(
          'deadline_exceeded',
          `the run passed its deadline (${run.deadlineAt?.toISOString()}) after ${output.steps} provider calls; raise deadline_seconds to give it longer`,
        );
      return { status: 'stopped', reason, output, costMicroCents: cost };
    }
    if (err instanceof ProviderError) return fail(runFailureCategory(err.category), err.message, err.category);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

const INPUT_CODES = new Set([3, 5, 6, 9, 11]); // INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION, OUT_OF_RANGE
/** An app that cannot serve the call: down, timed out, or the tool no longer enabled (UNAVAILABLE, DEADLINE_EXCEEDED, FAILED_PRECONDITION). */
const APP_DOWN_CODES = new Set([14, 4, 9]);

/** One tool call: a result for the model, or a failure that ends the run. */
async function callTool(
  deps: ExecutorDeps,
  tool: OfferedTool,
  args: Record<string, unknown>,
  ctx: CallContext,
): Promise<{ content: string; isError: boolean } | { failure: FailureCategory; detail: string }> {
  try {
    const result = tool.app
      ? await callAppTool(deps.clients, tool.app, args, ctx)
      : { content: JSON.stringify(await tool.builtin.call(args, ctx, deps.clients)), isError: false };
    // One limit on what goes back to the model, built-in or app tool: a result is read by the model on every later step.
    return { ...result, content: result.content.slice(0, TOOL_RESULT_MAX_CHARS) };
  } catch (err) {
    if (ctx.signal.aborted) throw ctx.signal.reason;
    const failure: FailureCategory = tool.app ? 'app_unavailable' : 'tool_error';
    if (err instanceof ToolInputError) return { content: err.message, isError: true };
    if (err instanceof ToolUnavailable) return { failure, detail: `tool ${tool.spec.name} failed: ${err.message}` };
    const code = (err as { code?: unknown }).code;
    const message =
      typeof code === 'number' && 'metadata' in (err as object)
        ? decodeStatusDetails(err as never).message
        : (err as Error).message;
    if (tool.app && typeof code === 'number' && APP_DOWN_CODES.has(code))
      return { failure, detail: `app tool ${tool.spec.name} is unavailable: ${message}` };
    // The model's input was refused: it reads why and may try again.
    if (typeof code === 'number' && INPUT_CODES.has(code)) return { content: message, isError: true };
    return { failure, detail: `tool ${tool.spec.name} failed: ${message}` };
  }
}
