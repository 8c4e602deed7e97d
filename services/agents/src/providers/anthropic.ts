import Anthropic from '@anthropic-ai/sdk';
import { toProviderError } from './errors.js';
import type { AdapterOptions } from './openai.js';
import { policyFetch } from './policy-fetch.js';
import { SdkClients } from './sdk-clients.js';
import type { ChatRequest, ChatResponse, ProviderAdapter, ProviderTarget, ToolCall } from './types.js';

/** Anthropic through its official SDK: models list for the probe, messages with tool use. */
export class AnthropicAdapter implements ProviderAdapter {
  readonly name = 'anthropic' as const;
  /** The chat calls' clients: one per key and settings (SdkClients); a probe makes its own. */
  private readonly clients = new SdkClients((target, timeout, maxRetries) =>
    this.newClient(target, timeout, maxRetries),
  );

  constructor(private readonly options: AdapterOptions) {}

  private newClient(target: ProviderTarget, timeout: number, maxRetries: number): Anthropic {
    // The key given here is the client's only credential: the SDK reads no ANTHROPIC_* key from the
    // environment. The platform's URL is the operator's; a tenant's goes through the tenant egress policy.
    return new Anthropic({
      apiKey: target.apiKey,
      baseURL: target.baseURL ?? this.options.baseURL,
      fetch: policyFetch(target.baseURL ? this.options.egress : this.options.platformEgress, timeout),
      timeout,
      maxRetries,
      logLevel: 'off',
    });
  }

  async probe(target: ProviderTarget, signal?: AbortSignal): Promise<void> {
    try {
      await this.newClient(target, this.options.probeTimeoutMs, 0).models.list({}, { signal });
    } catch (err) {
      throw toProviderError('Anthropic', Anthropic, err, signal, target);
    }
  }

  async chat(req: ChatRequest, signal?: AbortSignal): Promise<ChatResponse> {
    const messages: Anthropic.MessageParam[] = req.messages.map((m): Anthropic.MessageParam => {
      if (m.role === 'user') return { role: 'user', content: m.text };
      if (m.role === 'assistant') {
        return {
          role: 'assistant',
          content: [
            ...(m.text ? [{ type: 'text' as const, text: m.text }] : []),
            ...m.toolCalls.map((c) => ({ type: 'tool_use' as const, id: c.id, name: c.name, input: c.arguments })),
          ],
        };
      }
      return {
        role: 'user',
        content: m.results.map((r) => ({
          type: 'tool_result' as const,
          tool_use_id: r.callId,
          content: r.content,
          is_error: r.isError,
        })),
      };
    });
    const tools: Anthropic.Tool[] = req.tools.map((t) => ({
      name: t.name,
      description: t.description,
      input_schema: t.inputSchema as Anthropic.Tool.InputSchema,
    }));
    try {
      const res = await this.clients.get(req, this.options.chatTimeoutMs, this.options.chatMaxRetries).messages.create(
        {
          model: req.model,
          system: req.system,
          messages,
          max_tokens: req.maxOutputTokens,
          ...(tools.length ? { tools } : {}),
        },
        { signal },
      );
      const text = res.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
      const toolCalls: ToolCall[] = res.content.flatMap((b) =>
        b.type === 'tool_use'
          ? [{ id: b.id, name: b.name, arguments: (b.input ?? {}) as Record<string, unknown> }]
          : [],
      );
      return { text, toolCalls, usage: { inputTokens: res.usage.input_tokens, outputTokens: res.usage.output_tokens } };
    } catch (err) {
      throw toProviderError('Anthropic', Anthropic, err, signal, req);
    }
  }
}
