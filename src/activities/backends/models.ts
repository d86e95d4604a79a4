import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { TokenUsage } from '../../pipeline/stage-result.js';

/** Model tiers and prices, overridable per worker (see `loadModelCatalog`). */
export interface ModelCatalog {
  /** Tier or alias (`opus`, `sonnet`, `haiku`) to model id. */
  aliases: Record<string, string>;
  /** Model id to price. @unit US dollars per million tokens */
  prices: Record<string, { input: number; output: number }>;
}

/**
 * The ids the Claude Code CLI pinned in package.json resolves its aliases to, and the prices it charges
 * for them (measured: 1M input + 1M output tokens cost $24 / $12 / $3), so both backends agree on cost.
 */
export const DEFAULT_MODELS: ModelCatalog = {
  aliases: { opus: 'claude-opus-5-5', sonnet: 'claude-sonnet-5-5', haiku: 'claude-haiku-5-5' },
  prices: {
    'claude-opus-5-5': { input: 4, output: 20 },
    'claude-sonnet-5-5': { input: 2, output: 10 },
    'claude-haiku-5-5': { input: 0.5, output: 2.5 },
  },
};

const price = z.strictObject({ input: z.number().min(0), output: z.number().min(0) });
const overridesSchema = z.strictObject({
  aliases: z.record(z.string().min(1), z.string().min(1)).optional(),
  prices: z.record(z.string().min(1), price).optional(),
});

/** The model id of a tier or alias; anything else is taken as an id already. */
export function resolveModelId(model: string, catalog: ModelCatalog): string {
  return catalog.aliases[model] ?? model;
}

/** Cost of a call, or `null` for a model with no known price (tokens are still reported). */
export function computeCostUsd(modelId: string, usage: TokenUsage, catalog: ModelCatalog): number | null {
  const known = catalog.prices[modelId];
  if (!known) return null;
  return (usage.inputTokens * known.input + usage.outputTokens * known.output) / 1_000_000;
}

/**
 * The default catalogue with overrides from `AGENT_PIPELINE_MODELS`, merged over the defaults:
 * either JSON (`{"aliases": {"sonnet": "claude-sonnet-x"}, "prices": {"claude-sonnet-x": {"input": 3, "output": 15}}}`,
 * prices in US dollars per million tokens) or the path of a file holding that JSON.
 * @throws Error naming the variable and what is wrong, so the worker refuses to start with a bad table
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
      throw new Error(`cannot read the ${source} (${(err as NodeJS.ErrnoException).code ?? 'error'}); set the variable to JSON or to an existing file`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source} is not valid JSON (${(err as Error).message}); expected {"aliases": {...}, "prices": {...}}`);
  }
  const parsed = overridesSchema.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${source} is invalid: ${problems}; expected {"aliases": {"tier": "model-id"}, "prices": {"model-id": {"input": N, "output": N}}}`);
  }
  return {
    aliases: { ...DEFAULT_MODELS.aliases, ...parsed.data.aliases },
    prices: { ...DEFAULT_MODELS.prices, ...parsed.data.prices },
  };
}
