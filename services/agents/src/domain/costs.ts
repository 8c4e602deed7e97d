/**
 * Token prices, in US cents per million tokens (= millionths of a cent per token), per model: the
 * table run costs come from. Keep it in step with the providers' price pages. A model missing here
 * runs only with the tenant's own key and the prices its config gives (docs/agents.md).
 */
import type { ProviderName } from './blueprints.js';

export interface Price {
  /** US cents per million input tokens. */
  input: number;
  /** US cents per million output tokens. */
  output: number;
}

export const PRICES: Record<string, Price & { provider: ProviderName }> = {
  'gpt-4.1-mini': { provider: 'openai', input: 40, output: 160 },
  'gpt-4.1': { provider: 'openai', input: 200, output: 800 },
  'claude-haiku-4-5': { provider: 'anthropic', input: 100, output: 500 },
  'claude-sonnet-4-5': { provider: 'anthropic', input: 300, output: 1_500 },
};

/** The table's price of a model, if it has one. */
export function tablePrice(model: string): (Price & { provider: ProviderName }) | undefined {
  return Object.hasOwn(PRICES, model) ? PRICES[model] : undefined;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/**
 * What a provider call cost, in millionths of a cent (integers, summed exactly over a run). A
 * config's price may have fractions of a cent per million tokens: any started millionth counts.
 */
export function costMicroCents(price: Price, usage: Usage): number {
  const exact = usage.inputTokens * price.input + usage.outputTokens * price.output;
  // Rounded to a millionth first: 1,000 tokens × 0.1 is 100.00000000000001 in floating point, not 101.
  return Math.ceil(Math.round(exact * 1e6) / 1e6);
}

/** Whole cents as the API shows them: any started cent counts. */
export function toCents(microCents: number): number {
  return Math.ceil(microCents / 1_000_000);
}

/** The platform's fee on a run that used the platform's own key: basis points of the cost, rounded up. */
export function platformFeeCents(microCents: number, feeBps: number): number {
  return Math.ceil((microCents * feeBps) / 10_000 / 1_000_000);
}
