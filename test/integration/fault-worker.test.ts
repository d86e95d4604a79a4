import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test, type TestContext } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { readRun } from '../../src/library/run-reader.js';
import { waitFor } from './claude-cli-world.js';
import { runCli } from './cli-helpers.js';
import { hostsWorld, longestStickyWaitMs, waitForRequest } from './fault-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * A worker host dies (SIGKILL to the worker and its agents) and another one takes over: during a stage, and
 * while the run waits for an approval. Real worker processes, the real claude CLI, the scripted model.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const RULES: Rule[] = [
  {
    name: 'crash',
    match: 'Pipeline: crash · Stage: build ·',
    turns: [
      { text: 'Step one.', tool: { name: 'Bash', input: { command: 'echo one >> log.txt', description: 'Log step one' } } },
      // Streams for about ten seconds: the worker is killed in the middle of it, once the server holds a heartbeat with
      // the cost of step one (the SDK sends heartbeats at most every 0.8 × heartbeatTimeout, here 4 s).
      { text: 'Step two, slowly. '.repeat(40), chunks: 40, chunkDelayMs: 250, tool: { name: 'Bash', input: { command: 'echo two >> log.txt', description: 'Log step two' } } },
      // After the crash the CLI resumes the session with a note that the attempt was interrupted (and an
      // "interrupted" assistant message, so the script continues here): finish what is missing, once.
      { text: 'Checking what is done.', tool: { name: 'Bash', input: { command: 'grep -qx two log.txt || echo two >> log.txt', description: 'Log step two if missing' } } },
      { text: report('Logged both steps.') },
    ],
  },
  { name: 'gate', match: 'Pipeline: gate · Stage: draft ·', turns: [{ text: report('Drafted.') }] },
  { name: 'gate-after', match: 'Pipeline: gate · Stage: publish ·', turns: [{ text: report('Published.') }] },
];

const PIPELINE = (name: string, stages: string): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, retries: 3, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash, Read] }\nstages:\n${stages}`;

// Each test has a queue, a model server and workers of its own (hostsWorld): they run at once, and a worker one test
// starts never takes the other's run.
describe.concurrent('a worker that dies', () => {
  const world = (name: string, onTestFinished: TestContext['onTestFinished']) => hostsWorld(name, { scenario: { rules: RULES } }, onTestFinished);

  test('during a stage: another worker resumes the stage, and its files are neither lost nor duplicated', async ({ onTestFinished }) => {
    const { harness, worker } = await world('fault-worker-stage', onTestFinished);
    const file = await harness.writePipeline('crash', PIPELINE('crash', '  - id: build\n    prompt: Log two steps.\n'));
    const first = worker();
    const handle = await harness.start(file);
    await waitForRequest(harness.modelServer, (r) => r.rule === 'crash' && r.turn === 1, 90_000);
    const live = await waitFor(
      async () => (await readRun(harness.client, handle.workflowId)).live.get('build'),
      (attempt) => (attempt?.costUsd ?? 0) > 0,
      'a heartbeat with the cost of step one',
      30_000,
    );
    await first.crash();
    worker();

    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    const build = stageOf(state, 'build');
    expect(build.result?.attempt).toBeGreaterThanOrEqual(2);
    expect(await readFile(path.join(state.workspace!, 'log.txt'), 'utf8')).toBe('one\ntwo\n');
    const paths = build.result!.artifacts.map((a) => a.path);
    expect(paths).toContain('log.txt');
    expect(new Set(paths).size).toBe(paths.length);
    // The second attempt resumed the session: the model saw step one's tool result, and step one never ran again.
    const turns = harness.modelServer.requests().filter((r) => r.rule === 'crash').map((r) => r.turn);
    expect(turns.filter((t) => t === 0)).toHaveLength(1);
    // The stage's cost counts the killed attempt too: what it had spent by its last heartbeat, plus the retry's own.
    const transcript = await readFile(path.join(harness.workspacesRoot, build.result!.transcript!), 'utf8');
    const retryCost = (JSON.parse(transcript.trim().split('\n').at(-1)!) as { type: string; total_cost_usd: number }).total_cost_usd;
    expect(build.result!.costUsd).toBeCloseTo(live!.costUsd! + retryCost, 6);
    // The run's next workflow task waited for the dead worker, which had the run cached, only as long as the workers'
    // AGENT_PIPELINE_STICKY_TIMEOUT (2 s here; Temporal's default is 10 s).
    expect(await longestStickyWaitMs(handle)).toBeLessThan(6_000);
  });

  test('during a wait for approval: the wait survives, and a new worker takes the decision', async ({ onTestFinished }) => {
    const { harness, worker } = await world('fault-worker-gate', onTestFinished);
    // The wait is what is tested, not the agents: the API backend spares two `claude` runs (issue 32).
    const api = '    backend: anthropic-api\n    maxTokens: 500\n';
    const file = await harness.writePipeline('gate', PIPELINE('gate', `  - id: draft\n${api}    prompt: Draft.\n    approval: true\n  - id: publish\n${api}    needs: [draft]\n    prompt: Publish.\n`));
    const first = worker();
    const handle = await harness.start(file);
    await waitForWaiting(handle, 'draft', 'approval');
    await first.crash();
    worker();
    const approved = await runCli(['approve', handle.workflowId, '--stage', 'draft'], harness.env);
    expect(approved.exitCode, String(approved.all ?? approved.stderr)).toBe(0);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.stages.map((s) => s.status)).toEqual(['completed', 'completed']);
  });
});
