import type { ProviderName } from '../domain/blueprints.js';
import type { Usage } from '../domain/costs.js';

/** A tool the model may call: a name, what it does, and the JSON Schema of its arguments. */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export interface ToolCall {
  /** The provider's id of the call, echoed with its result. */
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface ToolResult {
  callId: string;
  name: string;
  /** The result as text (JSON for structured results). */
  content: string;
  isError: boolean;
}

/** A conversation in provider-neutral form; each adapter maps it to its wire format. */
export type ChatMessage =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text: string; toolCalls: ToolCall[] }
  | { role: 'tool'; results: ToolResult[] };

/**
 * Where a call goes and with which key: `baseURL` is a tenant's server (its config's base_url,
 * called through the egress policy); without it, the platform's URL for the provider.
 */
export interface ProviderTarget {
  apiKey: string;
  baseURL?: string | undefined;
}

export interface ChatRequest extends ProviderTarget {
  model: string;
  system: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  maxOutputTokens: number;
}

export interface ChatResponse {
  /** The text of the answer (may be empty when the model only calls tools). */
  text: string;
  /** Tools the model wants called before it answers; empty for a final answer. */
  toolCalls: ToolCall[];
  usage: Usage;
}

/** One provider behind its official SDK: the key probe and chat with tools. */
export interface ProviderAdapter {
  readonly name: ProviderName;
  /** Lists models with the key (costs nothing); throws ProviderError on any refusal or failure. */
  probe(target: ProviderTarget, signal?: AbortSignal): Promise<void>;
  chat(request: ChatRequest, signal?: AbortSignal): Promise<ChatResponse>;
}
