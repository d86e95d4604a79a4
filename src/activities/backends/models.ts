import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import type { TokenUsage } from '../../pipeline/stage-result.js';

/** Model tiers and prices, overridable per worker (see `loadModelCatalog`). */
export interface ModelCatalog {
  /** Tier or alias (`opus`, `sonnet`, `haiku`) to model id. */
  aliases: Record<string, string>;
  /** Model id to price. @unit US dollars per million tokens */
  prices: Record<string, ModelPrice>;
}

/** What a model's tokens cost. @unit US dollars per million tokens */
export interface ModelPrice {
  input: number;
  output: number;
  /** Input read from the prompt cache. @default 0.1 × `input` */
  cacheRead?: number;
  /** Input written to the prompt cache (5-minute lifetime). @default 1.25 × `input` */
  cacheWrite?: number;
}

/** Anthropic's published prompt-cache multipliers of the input price: reads cost a tenth, 5-minute writes a quarter more. */
export const CACHE_READ_MULTIPLIER = 0.1;
export const CACHE_WRITE_MULTIPLIER = 1.25;

/**
 * The ids the Claude Code CLI pinned in package.json resolves its aliases to, and the prices it charges
 * for them (measured: 1M input + 1M output tokens cost $24 / $12 / $3), so both backends agree on cost.
 */
export const DEFAULT_MODELS: ModelCatalog = {
  aliases: { opus: 'claude-opus-5-5', sonnet: 'claude-sonnet-5-5', haiku: 'claude-haiku-5-5' },
  // Cache reads as the pinned CLI charges them (measured: 1M read tokens cost $0.20 / $0.10 / $0.05, so 0.05× input for
  // opus and sonnet and the default 0.1× for haiku); writes at the default 1.25× (measured $5 / $2.50 / $0.625). A model
  // added without cache prices gets 0.1× and 1.25×. test/integration/claude-cli.test.ts compares these with the CLI.
  prices: {
    'claude-opus-5-5': { input: 4, output: 20, cacheRead: 0.2 },
    'claude-sonnet-5-5': { input: 2, output: 10, cacheRead: 0.1 },
    'claude-haiku-5-5': { input: 0.5, output: 2.5, cacheRead: 0.05 },
  },
};

const price = z.strictObject({
  input: z.number().min(0),
  output: z.number().min(0),
  cacheRead: z.number().min(0).optional(),
  cacheWrite: z.number().min(0).optional(),
});
const overridesSchema = z.strictObject({
  aliases: z.record(z.string().min(1), z.string().min(1)).optional(),
  prices: z.record(z.string().min(1), price).optional(),
});

/** The model id of a tier or alias; anything else is taken as an id already. */
export function resolveModelId(model: string, catalog: ModelCatalog): string {
  return catalog.aliases[model] ?? model;
}

/** A model's prices with the cache prices filled in, or `undefined` for a model with no known price. */
export function priceOf(modelId: string, catalog: ModelCatalog): Required<ModelPrice> | undefined {
  const known = catalog.prices[modelId];
  if (!known) return undefined;
  return {
    input: known.input,
    output: known.output,
    cacheRead: known.cacheRead ?? known.input * CACHE_READ_MULTIPLIER,
    cacheWrite: known.cacheWrite ?? known.input * CACHE_WRITE_MULTIPLIER,
  };
}

/**
 * Cost of a call: input, output, cache reads and cache writes, each at its price; `null` for a model with no
 * known price (tokens are still reported).
 */
export function computeCostUsd(modelId: string, usage: TokenUsage, catalog: ModelCatalog): number | null {
  const known = priceOf(modelId, catalog);
  if (!known) return null;
  const dollarsPerMillion =
    usage.inputTokens * known.input +
    usage.outputTokens * known.output +
    (usage.cacheReadTokens ?? 0) * known.cacheRead +
    (usage.cacheWriteTokens ?? 0) * known.cacheWrite;
  return dollarsPerMillion / 1_000_000;
}

/**
 * The default catalogue with overrides from `AGENT_PIPELINE_MODELS`, merged over the defaults:
 * either JSON (`{"aliases": {"sonnet": "claude-sonnet-x"}, "prices": {"claude-sonnet-x": {"input": 3, "output": 15}}}`,
 * prices in US dollars per million tokens; `cacheRead` and `cacheWrite` default to 0.1× and 1.25× `input`) or the path of a file holding that JSON.
 * @throws ConfigError (code `CONFIG_INVALID`) naming the variable and what is wrong, so the worker refuses to start with a bad table
 */
export function loadModelCatalog(env: NodeJS.ProcessEnv): ModelCatalog {
  const setting = env.AGENT_PIPELINE_MODELS?.trim();
  if (!setting) return DEFAULT_MODELS;
  const source = setting.startsWith('{') ? 'AGENT_PIPELINE_MODELS' : `AGENT_PIPELINE_MODELS file ${setting}`;
  let text = setting;
  if (!setting.startsWith('{')) {
    try {
      text = readFileSync(setting, 'utf8');
    } catch (err) {
      throw new ConfigError(`[CONFIG_INVALID] cannot read the ${source} (${(err as NodeJS.ErrnoException).code ?? 'error'}); set the variable to JSON or to an existing file`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`[CONFIG_INVALID] ${source} is not valid JSON (${(err as Error).message}); expected {"aliases": {...}, "prices": {...}}`);
  }
  const parsed = overridesSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ConfigError(`[CONFIG_INVALID] ${source} is invalid: ${problems}; expected {"aliases": {"tier": "model-id"}, "prices": {"model-id": {"input": N, "output": N, "cacheRead"?: N, "cacheWrite"?: N}}}`);
  }
  return {
    aliases: { ...DEFAULT_MODELS.aliases, ...parsed.data.aliases },
    prices: { ...DEFAULT_MODELS.prices, ...parsed.data.prices },
  };
}
