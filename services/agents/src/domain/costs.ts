/**
 * Token prices, in US cents per million tokens (= millionths of a cent per token), per model: the
 * one table run costs come from. Keep it in step with the providers' price pages.
 */
export const PRICES: Record<string, { input: number; output: number }> = {
  'gpt-4.1-mini': { input: 40, output: 160 },
  'gpt-4.1': { input: 200, output: 800 },
  'claude-haiku-4-5': { input: 100, output: 500 },
  'claude-sonnet-4-5': { input: 300, output: 1_500 },
};

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/** What a provider call cost, in millionths of a cent (exact integers; summed over a run). */
export function costMicroCents(model: string, usage: Usage): number {
  const price = PRICES[model];
  if (!price) throw new Error(`no price for model ${model}: add it to PRICES in services/agents/src/domain/costs.ts`);
  return usage.inputTokens * price.input + usage.outputTokens * price.output;
}

/** Whole cents as the API shows them: any started cent counts. */
export function toCents(microCents: number): number {
  return Math.ceil(microCents / 1_000_000);
}

/** The platform's fee on a run that used the platform's own key: basis points of the cost, rounded up. */
export function platformFeeCents(microCents: number, feeBps: number): number {
  return Math.ceil((microCents * feeBps) / 10_000 / 1_000_000);
}
