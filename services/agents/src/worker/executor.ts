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
import { costMicroCents, toCents, type Price } from '../domain/costs.js';
import { stepArguments, stepText } from '../domain/steps.js';
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
import type { StepRow } from '../repo/runs.js';

const MAX_STEPS = 20;
/**
 * Tool calls a run makes at most, whatever its guardrails: with MAX_STEPS model calls and each
 * step's texts cut to 4 KiB, a run's steps stay well inside one response of GET …/steps.
 */
const MAX_TOOL_CALLS = 200;
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
  | 'app_needs_authorization'
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
  model: string;
  /** The tenant's server (its config's base_url), or null for the platform's URL. */
  baseUrl: string | null;
  /** What the model's tokens cost (the config's price, or the table's). */
  price: Price;
  apiKey: string;
  budgetCents: number | null;
  deadlineAt: Date | null;
  /** What earlier attempts of the run already cost (a re-run after a lost worker); counts against the budget. */
  spentMicroCents: number;
  /** Aborts on cancel, lease loss or shutdown (with a RunStop). */
  signal: AbortSignal;
  /** The run acting as its agent, for tool calls that abort with `signal`. */
  actAs(signal: AbortSignal): CallContext;
  /** The index of the run's first step (after the steps of earlier attempts). */
  firstStepIndex: number;
  /**
   * Called when a step ended, with the run's cost and output so far after a model call: the worker
   * writes them (and NOTIFYs) in one transaction.
   */
  recordStep(step: StepRow, progress?: { costMicroCents: number; output: RunOutput }): Promise<void>;
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
  const secrets = [run.apiKey];
  let stepIndex = run.firstStepIndex;
  const step = (fields: Partial<StepRow> & Pick<StepRow, 'type' | 'started_at'>): StepRow => ({
    step_index: stepIndex++,
    ended_at: new Date(),
    tool_name: null,
    arguments: null,
    result: null,
    is_error: null,
    input_tokens: null,
    output_tokens: null,
    cost_micro_cents: null,
    ...fields,
  });
  try {
    const { offered, known } = await toolsFor(deps, run, ctx);
    const byName = new Map(offered.map((t) => [t.spec.name, t]));
    for (let call = 1; call <= MAX_STEPS; call++) {
      const started = new Date();
      const answer = await deps.providers[run.provider].chat(
        {
          apiKey: run.apiKey,
          baseURL: run.baseUrl ?? undefined,
          model: run.model,
          system: run.blueprint.prompt,
          messages,
          tools: offered.map((t) => t.spec),
          maxOutputTokens: MAX_OUTPUT_TOKENS,
        },
        signal,
      );
      const ended = new Date();
      output.steps = call;
      const callCost = costMicroCents(run.price, answer.usage);
      cost += callCost;
      const final = answer.toolCalls.length === 0;
      // A final answer a block_pattern matches is withheld, in the step too; max_output_chars cuts it.
      const blocked = final ? blockedBy(blocking.patterns, answer.text) : undefined;
      const cap = final ? maxOutputChars(run.guardrails) : undefined;
      const shown =
        blocked !== undefined
          ? ''
          : cap !== undefined && answer.text.length > cap
            ? answer.text.slice(0, cap)
            : answer.text;
      if (blocked !== undefined) output.text = '';
      else if (shown) output.text = shown;
      await run.recordStep(
        step({
          type: 'model_call',
          started_at: started,
          ended_at: ended,
          result: shown ? stepText(shown, secrets) : null,
          input_tokens: answer.usage.inputTokens,
          output_tokens: answer.usage.outputTokens,
          cost_micro_cents: callCost,
        }),
        { costMicroCents: cost, output },
      );
      if (run.budgetCents !== null && toCents(cost) > run.budgetCents) {
        return fail(
          'budget_exceeded',
          `the run cost ${toCents(cost)} cents after ${call} provider calls, more than its budget of ${run.budgetCents} cents; raise budget_usd_cents to let it finish`,
        );
      }
      if (run.deadlineAt && Date.now() > run.deadlineAt.getTime()) throw new RunStop('deadline');
      if (final) {
        if (blocked !== undefined)
          return fail(
            'guardrail_blocked',
            `the answer matches the block_pattern of guardrails[${blocked}] and was withheld`,
          );
        return { status: 'succeeded', output, costMicroCents: cost };
      }
      const results: ToolResult[] = [];
      for (const toolCall of answer.toolCalls) {
        if (toolCallCap !== undefined && output.tool_calls.length >= toolCallCap) {
          return fail('guardrail_blocked', `the model asked for more than ${toolCallCap} tool calls (max_tool_calls)`);
        }
        if (output.tool_calls.length >= MAX_TOOL_CALLS) {
          return fail(
            'guardrail_blocked',
            `the model asked for more than ${MAX_TOOL_CALLS} tool calls, the most one run makes; split the work over several runs`,
          );
        }
        const tool = byName.get(toolCall.name);
        const toolStarted = new Date();
        const toolStep = (result: string, isError: boolean) =>
          step({
            type: 'tool_call',
            started_at: toolStarted,
            tool_name: toolCall.name,
            arguments: stepArguments(toolCall.arguments, secrets),
            result: stepText(result, secrets),
            is_error: isError,
          });
        if (!tool) {
          if (known.has(toolCall.name)) {
            return fail(
              'guardrail_blocked',
              `the model called ${toolCall.name}, which the guardrails do not allow (allow_tools / deny_tools)`,
            );
          }
          const content = `unknown tool ${toolCall.name}; use one of: ${[...byName.keys()].join(', ')}`;
          output.tool_calls.push({ name: toolCall.name, is_error: true });
          results.push({ callId: toolCall.id, name: toolCall.name, content, isError: true });
          await run.recordStep(toolStep(content, true));
          continue;
        }
        const result = await callTool(deps, tool, toolCall.arguments, ctx);
        if ('failure' in result) {
          await run.recordStep(toolStep(result.detail, true));
          return fail(result.failure, result.detail);
        }
        output.tool_calls.push({ name: toolCall.name, is_error: result.isError });
        results.push({ callId: toolCall.id, name: toolCall.name, content: result.content, isError: result.isError });
        await run.recordStep(toolStep(result.content, result.isError));
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
    const details =
      typeof code === 'number' && 'metadata' in (err as object) ? decodeStatusDetails(err as never) : undefined;
    const message = details?.message ?? (err as Error).message;
    // An OAuth app whose grant is gone: no retry helps until an admin connects it again (docs/apps.md "OAuth").
    if (tool.app && details?.reason === 'APP_NEEDS_AUTHORIZATION')
      return { failure: 'app_needs_authorization', detail: `app tool ${tool.spec.name} cannot be called: ${message}` };
    if (tool.app && typeof code === 'number' && APP_DOWN_CODES.has(code))
      return { failure, detail: `app tool ${tool.spec.name} is unavailable: ${message}` };
    // The model's input was refused: it reads why and may try again.
    if (typeof code === 'number' && INPUT_CODES.has(code)) return { content: message, isError: true };
    return { failure, detail: `tool ${tool.spec.name} failed: ${message}` };
  }
}
