import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test, type TestContext } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { waitFor } from './claude-cli-world.js';
import { runCli, runCliCommands } from './cli-helpers.js';
import { hostsWorld, ownHostEnvironment, waitForRequest } from './fault-helpers.js';
import { loseHost, restorableManifest } from './machine-loss-helpers.js';
import { expectNoStageLeftRunning, stageOf, summarize, waitForState, waitForWaiting } from './workflow-helpers.js';

/*
 * A machine lost at the two places a run goes on from something other than its last attempt: in a review's rework
 * round (the reworked stage resumes its session with the reviewer's findings) and while the run waits for a person
 * (the stage resumes its session with the answer). As in checkpoint-machine-loss.test.ts, worker A (a real worker
 * process, the real claude CLI in its sandbox, the scripted model) is SIGKILLed with its agents and the run's folder
 * and bookkeeping are deleted; worker B shares only Temporal and the store with it (the same workspaces path, as
 * every host of a queue must have, and an owner id of its own), restores the run and finishes it. B runs in the test's
 * own process (as the harness's workers do): only A is killed, and a worker process costs 1.4 CPU-s to start.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string, extra: Record<string, unknown> = {}): string =>
  `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {}, ...extra })}\n\`\`\``;
const bash = (command: string, description: string) => ({ name: 'Bash', input: { command, description } });

const RULES: Rule[] = [
  {
    name: 'impl',
    match: 'Pipeline: rework-loss · Stage: impl ·',
    turns: [
      // Round 1.
      { text: 'Writing one.', tool: bash('echo one > one.txt', 'Write one') },
      { text: report('Wrote one.') },
      // Round 2, resuming the session with the reviewer's findings.
      { text: 'Writing two.', tool: bash('echo two > two.txt', 'Write two') },
      // Streams for about ten seconds: worker A is killed in the middle of it, after a checkpoint holds two.txt.
      { text: 'Writing three, slowly. '.repeat(40), chunks: 40, chunkDelayMs: 250, tool: bash('echo three > three.txt', 'Write three') },
      // The resumed session (Claude Code closes the cut turn with an empty reply of its own) goes on here.
      { text: 'Checking what is done.', tool: bash('test -f three.txt || echo three > three.txt', 'Write three if missing') },
      { text: report('Wrote two and three.') },
    ],
  },
  {
    name: 'review',
    match: 'Pipeline: rework-loss · Stage: review ·',
    turns: [
      { text: report('Not yet.', { verdict: 'rework', feedback: ['F1: two.txt and three.txt are missing'] }) },
      { text: report('All there.', { verdict: 'approve', feedback: [] }) },
    ],
  },
  {
    name: 'ask',
    match: 'Pipeline: wait-loss · Stage: ask ·',
    turns: [
      { text: 'Writing before.', tool: bash('echo before > before.txt', 'Write before') },
      { text: 'BLOCKED: Which colour should the file be?' },
      // After the answer, on the other worker: before.txt must be in the restored workspace.
      { text: 'Painting.', tool: bash('cat before.txt > after.txt && echo green >> after.txt', 'Write after') },
      { text: report('Painted it green.') },
    ],
  },
  { name: 'next', match: 'Pipeline: wait-loss · Stage: next ·', turns: [{ text: report('Read the file.') }] },
];

const DEFAULTS = 'defaults: { backend: claude-cli, model: sonnet, retries: 3, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash, Read], checkpoint: { every: 1s } }';

const REWORK_PIPELINE = [
  'name: rework-loss',
  DEFAULTS,
  'stages:',
  '  - id: impl',
  '    prompt: Write the files.',
  '  - id: review',
  // The reviewer's agent is not what is tested (impl's restored session is): the API backend spares two `claude` runs.
  '    backend: anthropic-api',
  '    maxTokens: 500',
  '    needs: [impl]',
  '    prompt: Review the files.',
  '    review: { of: impl, maxRounds: 3, onMaxRounds: fail }',
  '',
].join('\n');

const WAIT_PIPELINE = [
  'name: wait-loss',
  DEFAULTS,
  'stages:',
  '  - id: ask',
  '    prompt: Write before, then ask which colour.',
  '  - id: next',
  '    backend: anthropic-api',
  '    maxTokens: 500',
  '    needs: [ask]',
  '    prompt: Read what ask wrote.',
  '',
].join('\n');

/**
 * Worker B: a host of its own (as fault-helpers' worker processes are) on the harness's queue, in this process; shut
 * down when the test ends, before the harness closes.
 */
async function otherHost(harness: Harness, onTestFinished: TestContext['onTestFinished']): Promise<void> {
  const env = ownHostEnvironment({ ...harness.env, AGENT_PIPELINE_CHECKPOINTS: 'on' });
  const worker = await createPipelineWorker({ env, taskQueue: harness.taskQueue, workflowBundlePath: existsSync(WORKFLOW_BUNDLE) ? WORKFLOW_BUNDLE : undefined });
  const running = worker.run();
  // Test-finished hooks run last registered first: B stops before hostsWorld's hook closes the harness.
  onTestFinished(async () => {
    await stopTestWorker(`host B of ${harness.taskQueue}`, worker, running);
  });
}

// Each test has a queue, a model server and workers of its own (hostsWorld): they run at once, and a worker one test
// starts never takes the other's run.
describe.concurrent('a machine lost in a review round and during a wait for a person', () => {
  const world = async (name: string, onTestFinished: TestContext['onTestFinished']) => {
    const { harness, worker } = await hostsWorld(name, { scenario: { rules: RULES } }, onTestFinished);
    const requestsOf = (rule: string, turn: number) => harness.modelServer.requests().filter((r) => r.rule === rule && r.turn === turn);
    return { harness, worker: () => worker({ AGENT_PIPELINE_CHECKPOINTS: 'on' }), otherHost: () => otherHost(harness, onTestFinished), requestsOf };
  };

  test('a rework round cut short on one worker goes on on another, with round 1 and 2 files and the session', { timeout: 240_000 }, async ({ onTestFinished }) => {
    const { harness, worker, otherHost, requestsOf } = await world('checkpoint-loss-rework', onTestFinished);
    const file = await harness.writePipeline('rework-loss', REWORK_PIPELINE);
    const first = worker();
    const handle = await harness.start(file);
    const runId = handle.workflowId;
    // Turn 3 is round 2's second turn: asked for once two.txt is written, so a checkpoint after that holds it.
    await waitForRequest(harness.modelServer, (r) => r.rule === 'impl' && r.turn === 3, 120_000);
    const afterTwo = Date.now();
    await waitFor(() => restorableManifest(harness, runId), (m) => m?.reason === 'periodic' && Date.parse(m.takenAt) > afterTwo, 'a periodic checkpoint of round 2 to restore from', 30_000);
    const lostAt = await loseHost(harness, first, runId);
    await otherHost();

    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(summarize(state))).toBe('completed');
    const impl = stageOf(state, 'impl');
    expect(impl.round).toBe(2);
    expect(impl.result?.summary).toBe('Wrote two and three.');
    expect(stageOf(state, 'review').result?.verdict).toBe('approve');
    for (const [name, text] of [['one.txt', 'one\n'], ['two.txt', 'two\n'], ['three.txt', 'three\n']]) {
      expect(await readFile(path.join(state.workspace!, name), 'utf8')).toBe(text);
    }

    // The session resumed on B holds round 1, the reviewer's findings and round 2's first turn, and the restore note.
    const resumed = harness.modelServer.requests().slice(lostAt).filter((r) => r.rule === 'impl');
    expect(resumed.length).toBeGreaterThan(0);
    const body = JSON.stringify(resumed[0].body);
    expect(body).toContain('echo one > one.txt');
    expect(body).toContain('F1: two.txt and three.txt are missing');
    expect(body).toContain('echo two > two.txt');
    expect(body).toMatch(/restored from a checkpoint taken at \d{4}-\d\d-\d\dT/);
    // Neither round's work was redone: their first turns were answered once.
    expect(requestsOf('impl', 0)).toHaveLength(1);
    expect(requestsOf('impl', 2)).toHaveLength(1);

    const logs = await runCli(['logs', runId, '--stage', 'impl'], harness.env);
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain('Wrote two and three.');
    const status = await runCli(['status', runId], harness.env);
    expect(status.exitCode, status.all).toBe(0);
  });

  test('a run waiting for an answer on a lost worker is answered and goes on on another, from the checkpoint before the wait', { timeout: 240_000 }, async ({ onTestFinished }) => {
    const { harness, worker, otherHost, requestsOf } = await world('checkpoint-loss-wait', onTestFinished);
    const file = await harness.writePipeline('wait-loss', WAIT_PIPELINE);
    const first = worker();
    const handle = await harness.start(file);
    const runId = handle.workflowId;
    await waitForWaiting(handle, 'ask', undefined, 120_000);
    // The attempt that asked ended with a checkpoint: the one the run goes on from.
    const before = await restorableManifest(harness, runId);
    expect(before?.reason).toBe('end');
    const lostAt = await loseHost(harness, first, runId);
    await otherHost();

    const answered = await runCli(['answer', runId, '--stage', 'ask', 'Paint it green.'], harness.env);
    expect(answered.exitCode, answered.all).toBe(0);
    // A stage that started over (no restore, no session) would ask again: that ends this wait too, and fails below.
    const state = await waitForState(handle, (s) => s.status !== 'running' && s.status !== 'waiting', 180_000);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(summarize(state))).toBe('completed');
    expect(stageOf(state, 'ask').result?.summary).toBe('Painted it green.');
    expect(stageOf(state, 'next').status).toBe('completed');
    // The stage continued in the restored workspace: the file written before the wait was there.
    expect(await readFile(path.join(state.workspace!, 'after.txt'), 'utf8')).toBe('before\ngreen\n');

    // The session resumed on B holds the turns before the wait, the question, then the note and the answer.
    const resumed = harness.modelServer.requests().slice(lostAt).filter((r) => r.rule === 'ask');
    expect(resumed.length).toBeGreaterThan(0);
    const body = JSON.stringify(resumed[0].body);
    expect(body).toContain('echo before > before.txt');
    expect(body).toContain('Which colour should the file be?');
    expect(body).toContain('Paint it green.');
    expect(body).toContain(`restored from a checkpoint taken at ${before!.takenAt}`);
    expect(requestsOf('ask', 0)).toHaveLength(1);

    // Back to back in one process through the CLI's entry (each with its own argv, output and exit code): the first test
    // runs them as a user does.
    const [logs, status] = await runCliCommands([['logs', runId, '--stage', 'ask'], ['status', runId]], harness.env);
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain('Painted it green.');
    expect(status.exitCode, status.all).toBe(0);
  });
});
