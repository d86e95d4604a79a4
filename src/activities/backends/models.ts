import type { TokenUsage } from '../../pipeline/stage-result.js';

/** Model tiers and prices, overridable per worker (see `loadModelCatalog`). */
export interface ModelCatalog {
  /** Tier or alias (`opus`, `sonnet`, `haiku`) to model id. */
  aliases: Record<string, string>;
  /** Model id to price. @unit US dollars per million tokens */
  prices: Record<string, { input: number; output: number }>;
}

/** The ids the Claude Code CLI pinned in package.json resolves its aliases to, so both backends agree. */
export const DEFAULT_MODELS: ModelCatalog = {
  aliases: { opus: 'claude-opus-5-5', sonnet: 'claude-sonnet-5-5', haiku: 'claude-haiku-5-5' },
  prices: {
    'claude-opus-5-5': { input: 4, output: 20 },
    'claude-sonnet-5-5': { input: 3, output: 15 },
    'claude-haiku-5-5': { input: 1, output: 5 },
  },
};

export function resolveModelId(model: string, catalog: ModelCatalog): string {
  return catalog.aliases[model] ?? model;
}

/** Cost of a call, or `null` for a model with no known price (tokens are still reported). */
export function computeCostUsd(modelId: string, usage: TokenUsage, catalog: ModelCatalog): number | null {
  const price = catalog.prices[modelId];
  if (!price) return null;
  return (usage.inputTokens * price.input + usage.outputTokens * price.output) / 1_000_000;
}

/**
 * The default catalogue with overrides from `AGENT_PIPELINE_MODELS` (JSON with `aliases` and/or
 * `prices`), merged over the defaults.
 */
export function loadModelCatalog(env: NodeJS.ProcessEnv): ModelCatalog {
  if (!env.AGENT_PIPELINE_MODELS) return DEFAULT_MODELS;
  let overrides: Partial<ModelCatalog>;
  try {
    overrides = JSON.parse(env.AGENT_PIPELINE_MODELS) as Partial<ModelCatalog>;
  } catch (err) {
    throw new Error(`AGENT_PIPELINE_MODELS is not valid JSON (${(err as Error).message}); expected {"aliases": {...}, "prices": {...}}`);
  }
  return {
    aliases: { ...DEFAULT_MODELS.aliases, ...overrides.aliases },
    prices: { ...DEFAULT_MODELS.prices, ...overrides.prices },
  };
}
