import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { sha256Hex } from '../../src/activities/checkpoint/keys.js';
import { waitFor } from './claude-cli-world.js';
import { runCli } from './cli-helpers.js';
import { hostsWorld, waitForRequest } from './fault-helpers.js';
import { loseHost, restorableManifest, storeManifests } from './machine-loss-helpers.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * A machine is lost: worker A (a real worker process, the real claude CLI in its sandbox, the scripted model) runs a
 * stage that writes a file, checkpoints the run every second into the store, and is SIGKILLed with its agents; then
 * the run's folder and bookkeeping are deleted, as if the host were gone. Worker B shares only Temporal and the
 * store with it (the same workspaces path, as every host of a queue must have): it restores the run from the
 * checkpoint, resumes the agent's session and finishes the run.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const RULES: Rule[] = [
  {
    name: 'build',
    match: 'Pipeline: loss · Stage: build ·',
    turns: [
      { text: 'Step one.', tool: { name: 'Bash', input: { command: 'echo one > made.txt', description: 'Write step one' } } },
      // Streams for about ten seconds: the worker is killed in the middle of it, after a checkpoint holds step one.
      { text: 'Step two, slowly. '.repeat(40), chunks: 40, chunkDelayMs: 250, tool: { name: 'Bash', input: { command: 'echo two >> made.txt', description: 'Write step two' } } },
      // The resumed session (restored from the checkpoint, with a note of the restore) finishes here.
      { text: 'Checking what is done.', tool: { name: 'Bash', input: { command: 'grep -qx two made.txt || echo two >> made.txt', description: 'Write step two if missing' } } },
      { text: report('Wrote both steps.') },
    ],
  },
  { name: 'after', match: 'Pipeline: loss · Stage: after ·', turns: [{ text: report('Read the file.') }] },
  { name: 'off', match: 'Pipeline: off · Stage: only ·', turns: [{ text: report('Done.') }] },
];

const PIPELINE = [
  'name: loss',
  'defaults: { backend: claude-cli, model: sonnet, retries: 3, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash, Read], checkpoint: { every: 1s } }',
  'stages:',
  '  - id: build',
  '    prompt: Write two steps.',
  '  - id: after',
  '    needs: [build]',
  '    prompt: Read what build wrote.',
  '',
].join('\n');

// Each test has a queue, a model server and workers of its own (hostsWorld): they run at once, and a worker one test
// starts never takes the other's run.
describe.concurrent('a machine lost during a stage', () => {
  test('another worker restores the run from its checkpoint, resumes the session, and finishes it', async ({ onTestFinished }) => {
    const { harness, worker: host } = await hostsWorld('checkpoint-loss', { scenario: { rules: RULES } }, onTestFinished);
    const worker = () => host({ AGENT_PIPELINE_CHECKPOINTS: 'on' });
    const file = await harness.writePipeline('loss', PIPELINE);
    const first = worker();
    const handle = await harness.start(file);
    const runId = handle.workflowId;
    // Turn 1 is asked for once step one's command has run: a checkpoint after that holds made.txt.
    await waitForRequest(harness.modelServer, (r) => r.rule === 'build' && r.turn === 1, 90_000);
    const afterStepOne = Date.now();
    await waitFor(() => restorableManifest(harness, runId), (m) => m?.reason === 'periodic' && Date.parse(m.takenAt) > afterStepOne, 'a periodic checkpoint after step one to restore from', 30_000);
    const lostAt = await loseHost(harness, first, runId);
    // With the host gone, its transcripts are in the run's checkpoint: logs reads them from the store, saying so.
    const stored = await runCli(['logs', runId, '--stage', 'build'], harness.env);
    expect(stored.exitCode, String(stored.all ?? stored.stderr)).toBe(0);
    expect(String(stored.stdout)).toMatch(/══ .* · stage build · round 1 · attempt 1 · from checkpoint \S+ of \d{4}-.* in file:\/\/.* \(not in the workspaces folder this host sees; as of that checkpoint\)/);
    expect(String(stored.stdout)).toContain('echo one > made.txt');
    worker();

    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.stages).slice(0, 3_000)).toBe('completed');
    const build = stageOf(state, 'build');
    expect(build.result?.attempt).toBeGreaterThanOrEqual(2);
    expect(await readFile(path.join(state.workspace!, 'made.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(stageOf(state, 'after').status).toBe('completed');

    // The resumed session carried the turns before the loss (step one's command and its result), and the note.
    const resumed = harness.modelServer.requests().slice(lostAt).filter((r) => r.rule === 'build');
    expect(resumed.length).toBeGreaterThan(0);
    const body = JSON.stringify(resumed[0].body);
    expect(body).toContain('echo one > made.txt');
    expect(body).toMatch(/restored from a checkpoint taken at \d{4}-\d\d-\d\dT/);
    expect(body).toContain('Changes made after that time may be missing');
    // Step one's command never ran again: the script's first turn was answered once.
    expect(harness.modelServer.requests().filter((r) => r.rule === 'build' && r.turn === 0)).toHaveLength(1);

    const logs = await runCli(['logs', runId, '--stage', 'build'], harness.env);
    expect(logs.exitCode, String(logs.all ?? logs.stderr)).toBe(0);
    expect(String(logs.stdout)).toContain('Wrote both steps.');
    const status = await runCli(['status', runId], harness.env);
    expect(status.exitCode, String(status.all ?? status.stderr)).toBe(0);
    // The last stage's end was checkpointed too: a run waiting after it could move on elsewhere.
    expect((await storeManifests(harness, runId)).at(-1)?.reason).toBe('end');
  });

  test('a worker with AGENT_PIPELINE_CHECKPOINTS=off writes no checkpoint', async ({ onTestFinished }) => {
    const { harness, worker } = await hostsWorld('checkpoint-off', { scenario: { rules: RULES } }, onTestFinished);
    const file = await harness.writePipeline('off', 'name: off\ndefaults: { backend: claude-cli, model: sonnet, permissionMode: dontAsk }\nstages:\n  - id: only\n    prompt: Do it.\n');
    worker({ AGENT_PIPELINE_CHECKPOINTS: 'off' });
    const handle = await harness.start(file);
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const storeDir = path.join(harness.workspacesRoot, '.agent-pipeline', 'store');
    expect(existsSync(path.join(storeDir, 'runs', sha256Hex(handle.workflowId)))).toBe(false);
  });
});
