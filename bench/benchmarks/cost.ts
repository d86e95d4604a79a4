import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_MODELS, priceOf } from '../../src/activities/backends/models.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { round } from '../lib/stats.js';

/** About 50k tokens at the scripted server's four characters a token, in two context files (each under the inline bound). */
const CONTEXT_FILE_BYTES = 99_000;
const MODEL_ID = 'claude-sonnet-5-5';

const report = (extra: Record<string, unknown>): string =>
  `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary: 'Round done.', outputs: {}, ...extra })}\n\`\`\``;

/** Three review rounds: the reviewer sends the work back twice, then approves. */
const SCENARIO: ScenarioInput = {
  promptCache: true,
  rules: [
    { name: 'work', match: 'Stage: work ·', turns: [{ text: report({}) }, { text: report({}) }, { text: report({}) }] },
    {
      name: 'review',
      match: 'Stage: review ·',
      turns: [
        { text: report({ verdict: 'rework', feedback: ['Handle the empty title.'] }) },
        { text: report({ verdict: 'rework', feedback: ['Trim the dashes.'] }) },
        { text: report({ verdict: 'approve', feedback: [] }) },
      ],
    },
  ],
};

interface Billed {
  /** @unit US dollars */
  inputUsd: number;
  tokens: { input: number; cacheRead: number; cacheWrite: number };
}

/**
 * A 3-round review loop on the API backend with a ~50k-token context, with prompt caching on (the default) and off,
 * against the scripted model server, which reports cache tokens the way the API does. What is compared is the billed
 * input: full-price input, cache reads and cache writes, each at the model's price.
 */
export async function benchCost(stack: BenchStack): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('cost');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  const runOnce = async (cache: boolean): Promise<Billed> => {
    // Each run starts with an empty cache, as a first run of a pipeline would.
    stack.useScenario(SCENARIO);
    const file = await stack.writePipeline({
      name: `bench-cost-${cache ? 'cached' : 'uncached'}`,
      context: ['handbook.md', 'codebase.md'],
      defaults: { backend: 'anthropic-api', model: 'sonnet', cache },
      stages: [
        { id: 'work', prompt: 'Implement the task from the handbook.' },
        { id: 'review', needs: ['work'], prompt: 'Review the work.', review: { of: 'work', maxRounds: 3 } },
      ],
    });
    await writeFile(path.join(path.dirname(file), 'handbook.md'), 'Umbrellas keep people dry. '.repeat(CONTEXT_FILE_BYTES / 27));
    await writeFile(path.join(path.dirname(file), 'codebase.md'), 'export const slug = (t) => t; '.repeat(CONTEXT_FILE_BYTES / 30));
    const state = (await (await stack.startPipeline(file, queue)).result()) as RunState;
    if (state.status !== 'completed') throw new Error(`the ${cache ? 'cached' : 'uncached'} review loop ended ${state.status}`);
    const tokens = { input: 0, cacheRead: 0, cacheWrite: 0 };
    for (const stage of state.stages) {
      tokens.input += stage.totals?.inputTokens ?? 0;
      tokens.cacheRead += stage.totals?.cacheReadTokens ?? 0;
      tokens.cacheWrite += stage.totals?.cacheWriteTokens ?? 0;
    }
    const price = priceOf(MODEL_ID, DEFAULT_MODELS)!;
    const inputUsd = (tokens.input * price.input + tokens.cacheRead * price.cacheRead + tokens.cacheWrite * price.cacheWrite) / 1_000_000;
    return { inputUsd, tokens };
  };
  const cached = await runOnce(true);
  const uncached = await runOnce(false);
  await worker.stop();
  const ratio = round(cached.inputUsd / uncached.inputUsd, 3);
  const price = priceOf(MODEL_ID, DEFAULT_MODELS)!;
  return {
    name: 'cost',
    title: 'Prompt caching cost',
    method:
      'A work/review loop on the API backend (sonnet), three rounds (rework, rework, approve: six calls, the later ones continuing their ' +
      `conversations), with two context files of ${CONTEXT_FILE_BYTES / 1000} KB (~50k tokens), run with \`cache: true\` and \`cache: false\` against the ` +
      'scripted model server with its prompt cache on (a first request writes its prefix up to each breakpoint, later ones read it). ' +
      `Billed input = input × $${price.input}/M + cache reads × $${price.cacheRead}/M + cache writes × $${price.cacheWrite}/M.`,
    repetitions: 1,
    headline: `billed input cached / uncached ${ratio} ($${round(cached.inputUsd, 4)} vs $${round(uncached.inputUsd, 4)})`,
    goal: { text: 'ratio ≤ 0.35', met: ratio <= 0.35 },
    figures: { ratio, cachedInputUsd: round(cached.inputUsd, 5), uncachedInputUsd: round(uncached.inputUsd, 5), cached: cached.tokens, uncached: uncached.tokens },
    table: {
      columns: ['run', 'input tokens', 'cache read tokens', 'cache write tokens', 'billed input $'],
      rows: [
        ['cache: true', cached.tokens.input, cached.tokens.cacheRead, cached.tokens.cacheWrite, round(cached.inputUsd, 4)],
        ['cache: false', uncached.tokens.input, uncached.tokens.cacheRead, uncached.tokens.cacheWrite, round(uncached.inputUsd, 4)],
      ],
    },
    notes: [
      'The context files are the first system block of every call, so the reviewer reads what the work stage wrote; each continuation reads its whole conversation so far.',
      'Token counts are the scripted server\'s estimate (four characters a token); the ratio, not the dollars, is the figure to read. Deterministic: one run each.',
    ],
    durationS: 0,
  };
}
