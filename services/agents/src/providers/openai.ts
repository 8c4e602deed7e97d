import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { EgressPolicy } from '@workauto/egress';
import { toProviderError } from './errors.js';
import { policyFetch } from './policy-fetch.js';
import { SdkClients } from './sdk-clients.js';
import type { ChatRequest, ChatResponse, ProviderAdapter, ProviderTarget, ToolCall } from './types.js';

export interface AdapterOptions {
  /** The platform's URL, as the SDK takes it: OPENAI_BASE_URL includes /v1; ANTHROPIC_BASE_URL does not. */
  baseURL: string;
  /** The policy every call to a tenant's base_url goes through (EGRESS_ALLOW_PRIVATE, EGRESS_ALLOWED_CIDRS). */
  egress: EgressPolicy;
  /** The one calls to the platform's URL go through: the operator's URL, so any address (allowPrivate). */
  platformEgress: EgressPolicy;
  /** Per request: the key probe's and each chat call's timeout. */
  probeTimeoutMs: number;
  chatTimeoutMs: number;
  /** The SDK's own retries of connection failures, 408/409/429/5xx (honouring x-should-retry). */
  chatMaxRetries: number;
}

/** OpenAI through its official SDK: models list for the probe, chat completions with function tools. */
export class OpenAiAdapter implements ProviderAdapter {
  readonly name = 'openai' as const;
  /** The chat calls' clients: one per key and settings (SdkClients); a probe makes its own. */
  private readonly clients = new SdkClients((target, timeout, maxRetries) =>
    this.newClient(target, timeout, maxRetries),
  );

  constructor(private readonly options: AdapterOptions) {}

  private newClient(target: ProviderTarget, timeout: number, maxRetries: number): OpenAI {
    // Every setting given here, so the SDK reads none of OPENAI_* from the environment. The
    // platform's URL is the operator's; a tenant's goes through the tenant egress policy.
    return new OpenAI({
      apiKey: target.apiKey,
      baseURL: target.baseURL ?? this.options.baseURL,
      fetch: policyFetch(target.baseURL ? this.options.egress : this.options.platformEgress, timeout),
      organization: null,
      project: null,
      timeout,
      maxRetries,
      logLevel: 'off',
    });
  }

  async probe(target: ProviderTarget, signal?: AbortSignal): Promise<void> {
    try {
      await this.newClient(target, this.options.probeTimeoutMs, 0).models.list({ signal });
    } catch (err) {
      throw toProviderError('OpenAI', OpenAI, err, signal, target);
    }
  }

  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: req.system }];
    for (const m of req.messages) {
      if (m.role === 'user') messages.push({ role: 'user', content: m.text });
      else if (m.role === 'assistant') {
        messages.push({
          role: 'assistant',
          content: m.text || null,
          ...(m.toolCalls.length
            ? {
                tool_calls: m.toolCalls.map((c) => ({
                  id: c.id,
                  type: 'function' as const,
                  function: { name: c.name, arguments: JSON.stringify(c.arguments) },
                })),
              }
            : {}),
        });
      } else for (const r of m.results) messages.push({ role: 'tool', tool_call_id: r.callId, content: r.content });
    }
    const tools: ChatCompletionTool[] = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.inputSchema },
    }));
    try {
      const res = await this.clients
        .get(req, this.options.chatTimeoutMs, this.options.chatMaxRetries)
        .chat.completions.create(
          {
            model: req.model,
            messages,
            max_completion_tokens: req.maxOutputTokens,
            ...(tools.length ? { tools } : {}),
          },
          { signal },
        );
      const message = res.choices[0]?.message;
      const toolCalls: ToolCall[] = (message?.tool_calls ?? []).flatMap((c) =>
        c.type === 'function'
          ? [{ id: c.id, name: c.function.name, arguments: parseArguments(c.function.arguments) }]
          : [],
      );
      return {
        text: message?.content ?? '',
        toolCalls,
        usage: { inputTokens: res.usage?.prompt_tokens ?? 0, outputTokens: res.usage?.completion_tokens ?? 0 },
      };
    } catch (err) {
      throw toProviderError('OpenAI', OpenAI, err, signal, req);
    }
  }
}

/** Function arguments arrive as JSON text; a model that writes broken JSON gets {} and the tool's own error. */
function parseArguments(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
