import type { ScenarioInput } from '../../src/dev/scenario.js';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import { startRun } from '../../src/library/runs.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import type { Harness } from '../helpers/harness.js';

/* The scripted model's side of the fork tests (fork-run.test.ts, fork-rerun.test.ts): one rule per stage, named. */

export type Rule = NonNullable<ScenarioInput['rules']>[number];
export const report = (summary: string, extra: Record<string, unknown> = {}): string => `Done.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {}, ...extra })}\n\`\`\``;
const bash = (command: string, then: string): Rule['turns'] => [{ text: 'Working.', tool: { name: 'Bash', input: { command, description: 'Write the file' } } }, { text: report(then) }];

/** An API stage's answer: `text` (its `output:` file receives it, without the report block), then the report. */
const answer = (text: string, summary: string): Rule['turns'] => [{ text: `${text}\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\`` }];

export const RULES: Rule[] = [
  // Stages 1 and 2 run on the API backend and write their answer to one.txt and two.txt; stage 3's `claude` joins them.
  { name: 'stage1', match: 'Pipeline: forky · Stage: stage1 ·', turns: answer('one', 'wrote one') },
  { name: 'stage2', match: 'Pipeline: forky · Stage: stage2 ·', turns: answer('two', 'wrote two') },
  { name: 'stage3', match: 'Pipeline: forky · Stage: stage3 ·', turns: bash('cat one.txt two.txt > three.txt', 'joined them') },
  { name: 'stage4', match: 'Pipeline: forky · Stage: stage4 ·', turns: [{ text: report('checked') }] },
  // The API backend keeps the other two pipelines quick; the first call of `second` fails for good, the next succeeds.
  { name: 'flaky-first', match: 'Pipeline: flaky · Stage: first ·', turns: [{ text: report('first done') }] },
  { name: 'flaky-second', match: 'Pipeline: flaky · Stage: second ·', turns: [{ text: report('second done'), failFirst: [{ status: 400, shouldRetry: false }] }] },
  // Forked from `review` with a stricter prompt, the reviewer sends the taken-over `impl` back once.
  { name: 'strict-review', match: 'Review strictly.', turns: [{ text: report('not yet', { verdict: 'rework', feedback: ['F1: name the function'] }) }, { text: report('good now', { verdict: 'approve', feedback: [] }) }] },
  { name: 'review', match: 'Pipeline: loop · Stage: review ·', turns: [{ text: report('fine', { verdict: 'approve', feedback: [] }) }] },
  { name: 'impl', match: 'Pipeline: loop · Stage: impl ·', turns: [{ text: report('impl done') }, { text: report('renamed it') }] },
  { name: 'pair-a', match: 'Pipeline: pair · Stage: a ·', turns: [{ text: report('a done') }] },
  { name: 'pair-b', match: 'Pipeline: pair · Stage: b ·', turns: [{ text: report('b done'), delayMs: 500 }] },
  { name: 'pair-c', match: 'Pipeline: pair · Stage: c ·', turns: [{ text: report('c done'), delayMs: 3_000 }] },
  { name: 'pair-d', match: 'Pipeline: pair · Stage: d ·', turns: [{ text: report('d done') }] },
  { name: 'gap-a', match: 'Pipeline: gap · Stage: a ·', turns: [{ text: report('a done') }] },
  { name: 'gap-b', match: 'Pipeline: gap · Stage: b ·', turns: [{ text: report('b done') }] },
  // A run started from a definition, whose second stage fails once for good.
  { name: 'code-a', match: 'Pipeline: fromcode · Stage: a ·', turns: [{ text: report('a done') }] },
  { name: 'code-b', match: 'Pipeline: fromcode · Stage: b ·', turns: [{ text: report('b done'), failFirst: [{ status: 400, shouldRetry: false }] }] },
];

/** How many model requests the rule named `rule` answered. */
export function calls(harness: Harness, rule: string): number {
  return harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.rule === rule).length;
}

/**
 * Starts `file` as run `id` as `start` does (its files bundled: a fork compares their hashes) and waits for its end, in
 * process: the source runs are not what the fork tests look at, the forks are, and a CLI process costs a core for half a
 * second. Returns its final state.
 */
export async function runToEnd(harness: Harness, file: string, id: string): Promise<RunState> {
  const { handle } = await startRun(harness.client, await prepareRunInput(file, {}, []), { taskQueue: harness.taskQueue, id });
  return harness.finish(handle);
}

/**
 * The `loop` pipeline: a CLI stage `impl` and an API reviewer of it with the prompt `review` (the reviewer's agent is
 * not what the tests look at, impl's session is: the API backend spares `claude` runs).
 */
export function reviewLoopPipeline(review: string): string {
  return [
    'name: loop',
    'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk }',
    'stages:',
    '  - { id: impl, prompt: Write the code. }',
    `  - { id: review, backend: anthropic-api, maxTokens: 500, prompt: ${review}, needs: [impl], review: { of: impl } }`,
    '',
  ].join('\n');
}
