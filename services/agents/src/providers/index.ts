import type { EgressPolicy } from '@workauto/egress';
import type { ProviderName } from '../domain/blueprints.js';
import { AnthropicAdapter } from './anthropic.js';
import { OpenAiAdapter, type AdapterOptions } from './openai.js';
import type { ProviderAdapter } from './types.js';

export * from './types.js';
export { ProviderError, runFailureCategory, INDETERMINATE, type ProviderErrorCategory } from './errors.js';

export interface ProviderSettings {
  openaiBaseUrl: string;
  anthropicBaseUrl: string;
  probeTimeoutMs: number;
  chatTimeoutMs: number;
  chatMaxRetries: number;
}

export type Providers = Record<ProviderName, ProviderAdapter>;

/** The adapters; calls to a tenant's base_url go through `egress`, to the platform's URLs through `platformEgress`. */
export function createProviders(s: ProviderSettings, egress: EgressPolicy, platformEgress: EgressPolicy): Providers {
  const common: Omit<AdapterOptions, 'baseURL'> = {
    egress,
    platformEgress,
    probeTimeoutMs: s.probeTimeoutMs,
    chatTimeoutMs: s.chatTimeoutMs,
    chatMaxRetries: s.chatMaxRetries,
  };
  return {
    openai: new OpenAiAdapter({ ...common, baseURL: s.openaiBaseUrl }),
    anthropic: new AnthropicAdapter({ ...common, baseURL: s.anthropicBaseUrl }),
  };
}

/** A key's default provider (docs/agents.md "Provider keys (BYOK)"): anthropic for keys starting sk-ant-, else openai. */
export function providerOfKey(apiKey: string): ProviderName {
  return apiKey.startsWith('sk-ant-') ? 'anthropic' : 'openai';
}
