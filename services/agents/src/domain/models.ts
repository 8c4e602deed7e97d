/**
 * Which provider, model, server and price a tenant's config chooses, and what a run then uses.
 * Pure rules: the handlers check a PUT with them, the worker resolves a run with them.
 *
 * - base_url belongs to the stored key: it is set with the key (PUT byok-key probes the key there)
 *   and cleared with it, and a PUT of the config must carry the same value. A stored key is so only
 *   ever sent to the server it was checked against: an admin without the key cannot point it at
 *   another server.
 * - A model the price table does not know runs only with the tenant's own key and the prices the
 *   config gives (0 for a model the tenant hosts itself): a budget always has a price to count
 *   against, and the platform's key only ever runs models whose cost it knows.
 */
import type { Blueprint, ProviderName } from './blueprints.js';
import { PRICES, tablePrice, type Price } from './costs.js';

/** Model names as providers spell them: gpt-4.1-mini, llama3.1:8b, meta-llama/Llama-3.1-8B-Instruct. */
const MODEL = /^[\x21-\x7e]{1,128}$/;
const MAX_PRICE = 1_000_000; // $10,000 per million tokens: a typo guard, not a business limit

export interface ModelFields {
  provider: ProviderName | null;
  model: string | null;
  base_url: string | null;
  input_price_cents_per_mtok: number | null;
  output_price_cents_per_mtok: number | null;
}

/** The tenant's stored key: its provider and the server it was checked against (null: the provider's own). */
export interface KeyTarget {
  provider: ProviderName;
  base_url: string | null;
}

export interface Violation {
  field: string;
  description: string;
}

const keyPath = (b: Blueprint) => `PUT /agent-configs/${b.id}/byok-key`;

/** Why a config's model fields cannot be stored (base_url's own URL checks are the egress policy's). */
export function modelViolations(f: ModelFields, key: KeyTarget | undefined, b: Blueprint): Violation[] {
  const out: Violation[] = [];
  const add = (field: string, description: string) => out.push({ field, description });
  if (f.model !== null && !MODEL.test(f.model))
    add('model', 'must be 1 to 128 printable ASCII characters without spaces, e.g. gpt-4.1-mini or llama3.1:8b');
  for (const [field, value] of [
    ['input_price_cents_per_mtok', f.input_price_cents_per_mtok],
    ['output_price_cents_per_mtok', f.output_price_cents_per_mtok],
  ] as const) {
    if (value !== null && (!Number.isFinite(value) || value < 0 || value > MAX_PRICE))
      add(field, `must be from 0 to ${MAX_PRICE} (US cents per million tokens)`);
  }
  if ((f.input_price_cents_per_mtok === null) !== (f.output_price_cents_per_mtok === null)) {
    const missing =
      f.input_price_cents_per_mtok === null ? 'input_price_cents_per_mtok' : 'output_price_cents_per_mtok';
    add(
      missing,
      'is required with the other price: a price has both input_price_cents_per_mtok and output_price_cents_per_mtok',
    );
  }
  if (key && f.provider !== null && f.provider !== key.provider)
    add(
      'provider',
      `the stored key is a ${key.provider} key, so runs use ${key.provider}: leave provider out or set ${key.provider}, or first set a ${f.provider} key with ${keyPath(b)}`,
    );
  if (f.base_url !== null && !key)
    add(
      'base_url',
      `is where the tenant's own key is sent, and this config has no key: set the key and its server together with ${keyPath(b)} {"api_key", "base_url"}`,
    );
  else if (key && f.base_url !== key.base_url)
    add(
      'base_url',
      key.base_url === null
        ? `the stored key was checked against the provider's own URL and is only sent there; to use another server, set the key with it: ${keyPath(b)} {"api_key", "base_url"}`
        : `must be ${key.base_url}, the server the stored key was checked against (a key is only sent there); to use another server, set the key with it: ${keyPath(b)} {"api_key", "base_url"}`,
    );
  if (f.model !== null && MODEL.test(f.model)) {
    const provider = key?.provider ?? f.provider ?? b.defaultProvider;
    const priced = tablePrice(f.model);
    if (priced && priced.provider !== provider && f.base_url === null)
      add(
        'model',
        `${f.model} is a ${priced.provider} model, but the config runs ${provider}; set provider ${priced.provider} or another model`,
      );
    if (!priced && !key)
      add(
        'model',
        `${f.model} is not in this deployment's price table (${pricedModels()}), so it runs only with the tenant's own key: set the key first with ${keyPath(b)}`,
      );
    else if (!priced && f.input_price_cents_per_mtok === null && f.output_price_cents_per_mtok === null)
      add(
        'input_price_cents_per_mtok',
        `is required for ${f.model}, which the price table does not know: give input_price_cents_per_mtok and output_price_cents_per_mtok (US cents per million tokens; 0 and 0 for a model you host yourself)`,
      );
  }
  return out;
}

const pricedModels = () => Object.keys(PRICES).join(', ');

/** What a run calls: provider, model, server (null: the platform's URL), price, and whether the platform's key pays. */
interface RunModel {
  provider: ProviderName;
  model: string;
  baseUrl: string | null;
  price: Price;
  platformKey: boolean;
}

export type RunModelResult = { ok: RunModel } | { failure: { category: 'provider_auth' | 'internal'; detail: string } };

/**
 * A run's provider, model, server and price from its config, its stored key (if any) and the
 * platform's keys. A config written before these rules (or a key removed since) that cannot run
 * is a failure with a sentence saying what to set.
 */
export function runModel(
  config: ModelFields | undefined,
  key: KeyTarget | undefined,
  b: Blueprint,
  platformProviders: ReadonlySet<ProviderName>,
): RunModelResult {
  const f: ModelFields = config ?? {
    provider: null,
    model: null,
    base_url: null,
    input_price_cents_per_mtok: null,
    output_price_cents_per_mtok: null,
  };
  const configPath = `PUT /agent-configs/${b.id}`;
  if (key) {
    if (f.provider !== null && f.provider !== key.provider)
      return {
        failure: {
          category: 'provider_auth',
          detail: `the config runs ${f.provider} but the stored key is a ${key.provider} key; set a ${f.provider} key with ${keyPath(b)} or PUT the config without provider`,
        },
      };
    const model = f.model ?? b.models[key.provider];
    const own =
      f.input_price_cents_per_mtok !== null && f.output_price_cents_per_mtok !== null
        ? { input: f.input_price_cents_per_mtok, output: f.output_price_cents_per_mtok }
        : undefined;
    const price = own ?? tablePrice(model);
    if (!price)
      return {
        failure: {
          category: 'internal',
          detail: `model ${model} has no price, so the run's cost cannot be counted: give input_price_cents_per_mtok and output_price_cents_per_mtok with ${configPath}`,
        },
      };
    return { ok: { provider: key.provider, model, baseUrl: key.base_url, price, platformKey: false } };
  }
  const provider = f.provider ?? b.defaultProvider;
  const model = f.model ?? b.models[provider];
  // The platform pays the provider: only the table's models, at the table's price.
  const price = tablePrice(model);
  if (!price)
    return {
      failure: {
        category: 'provider_auth',
        detail: `no provider key for ${model}: the platform's key runs only the models of its price table (${pricedModels()}); set the tenant's own key with ${keyPath(b)}, or choose one of them with ${configPath}`,
      },
    };
  if (!platformProviders.has(provider))
    return {
      failure: {
        category: 'provider_auth',
        detail: `no provider key: set the tenant's key with ${keyPath(b)} (this deployment has no platform key for ${provider})`,
      },
    };
  return { ok: { provider, model, baseUrl: null, price, platformKey: true } };
}
