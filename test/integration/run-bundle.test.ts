import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunJson } from '../../src/cli/json.js';
import { scheduleJson, type ScheduleJson } from '../../src/library/schedule-spec.js';
import type { RunBundleSummary } from '../../src/pipeline/run-bundle.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { CLI, eventually, parseJson, runCli, runCliCommands } from './cli-helpers.js';

/** Text that reaches the model only if the worker read each bundled file. */
const MARKERS = {
  persona: 'PERSONA-7f3a: you write release notes.',
  reference: 'REFERENCE-91c2: never use exclamation marks.',
  step: 'STEP-4b8e: summarise the change for {{inputs.audience}}.',
  context: 'CONTEXT-d05f: the product is a kettle.',
  system: 'SYSTEM-22aa',
};

const PIPELINE = `name: carried
inputs: { audience: { default: users } }
context: [brief.md]
systemPrompt: shared/system.md
defaults: { backend: anthropic-api, retries: 0, timeout: 2m }
stages:
  - id: notes
    agent: agents/writer.md
    prompt: steps/notes.md
`;

const SCENARIO = {
  rules: [
    {
      name: 'notes',
      match: 'STEP-4b8e',
      repeatLastTurn: true,
      turns: [{ text: '```json\n{"success": true, "summary": "Wrote the notes.", "outputs": {}}\n```' }],
    },
  ],
};

/** Writes the pipeline folder under `root`. */
async function writePipelineFolder(root: string, step = MARKERS.step): Promise<string> {
  const files: Record<string, string> = {
    'pipeline/pipeline.yaml': PIPELINE,
    'pipeline/shared/system.md': `Pipeline: {{run.pipeline}} · Stage: {{stage.id}} · ${MARKERS.system}\n\n{{stage_prompt}}\n\n{{output_contract}}`,
    'pipeline/agents/writer.md': `---\nname: writer\nreferences: [../refs/style.md]\n---\n${MARKERS.persona}`,
    'pipeline/refs/style.md': MARKERS.reference,
    // With its own system prompt, a pipeline's prompt goes as written: the step places the context files itself.
    'pipeline/steps/notes.md': `${step}\n\n{{context}}`,
    'pipeline/brief.md': MARKERS.context,
  };
  for (const [relative, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, relative)), { recursive: true });
    await writeFile(path.join(root, relative), text);
  }
  return path.join(root, 'pipeline', 'pipeline.yaml');
}

describe('runs carry their own files', () => {
  let harness: Harness;
  let scratch: string;
  let worker: ResultPromise | undefined;

  beforeAll(async () => {
    harness = await createHarness('run-bundle', { scenario: SCENARIO, worker: false });
    scratch = await mkdtemp(path.join(tmpdir(), 'run-bundle-'));
  });
  afterAll(async () => {
    worker?.kill('SIGTERM');
    await worker?.catch(() => undefined);
    await harness?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('a run started while no worker runs completes after its pipeline folder is deleted, on a worker started in another folder', async () => {
    const client = path.join(scratch, 'client');
    const file = await writePipelineFolder(client);
    // The same pipeline with --files-from-worker carries nothing: its worker needs the folder. The two starts run back
    // to back in one process (a command costs a Node process); the watch below runs as a user runs it.
    const [started, startedFromWorker] = await runCliCommands([['start', file, '--json'], ['start', file, '--json', '--files-from-worker']], harness.env);
    expect(started.exitCode, started.all).toBe(0);
    const { runId, bundle } = parseJson<{ runId: string; bundle: RunBundleSummary }>(started);
    // pipeline.yaml, system.md, the agent, its reference, the step file and the context file.
    expect(bundle).toMatchObject({ files: 6, hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const fromWorker = parseJson<{ runId: string; bundle: null }>(startedFromWorker);
    expect(fromWorker.bundle).toBeNull();

    await rm(client, { recursive: true, force: true });
    const elsewhere = path.join(scratch, 'elsewhere');
    await mkdir(elsewhere);
    worker = execa('node', [CLI, 'worker'], { cwd: elsewhere, env: harness.env, extendEnv: false, reject: false, stdin: 'ignore' });

    const finished = await runCli(['watch', runId, '--json'], harness.env, 180_000);
    expect(finished.exitCode, finished.all).toBe(0);
    expect(parseJson<RunJson>(finished).status).toBe('completed');
    const request = JSON.stringify(harness.modelServer.requests().find((r) => r.rule === 'notes')?.body);
    for (const marker of [MARKERS.persona, MARKERS.reference, 'STEP-4b8e: summarise the change for users.', MARKERS.context, MARKERS.system]) {
      expect(request).toContain(marker);
    }
    const [statusJson, text, failed] = await runCliCommands(
      [['status', runId, '--json'], ['status', runId], ['watch', fromWorker.runId, '--json']],
      harness.env,
      180_000,
    );
    expect(parseJson<RunJson>(statusJson).bundle).toEqual(bundle);
    expect(text.stdout).toContain(`Files: 6 carried in the run, bundle ${bundle.hash.slice(0, 12)}`);

    expect(failed.exitCode).toBe(1);
    expect(parseJson<RunJson>(failed).stages[0].error).toMatchObject({ type: 'FILE_NOT_FOUND' });
  }, 300_000);

  test('a bundle above AGENT_PIPELINE_BUNDLE_MAX_BYTES fails at start with exit 2 naming the largest file', async () => {
    const file = await writePipelineFolder(path.join(scratch, 'big'), `STEP-4b8e ${'x'.repeat(4_000)}`);
    const result = await runCli(['start', file], { ...harness.env, AGENT_PIPELINE_BUNDLE_MAX_BYTES: '3000' });
    expect(result.exitCode, result.all).toBe(2);
    // One file above the whole limit is named as it is read (its read is capped there), before any total is made.
    expect(result.stderr).toContain(`[BUNDLE_TOO_LARGE] ${path.join(scratch, 'big', 'pipeline', 'steps', 'notes.md')} (\`stages[0].prompt\` in ${file}) is 3.9 KiB`);
  });

  test('a schedule bundles at create and says so; schedule update bundles the edited files again', async () => {
    const file = await writePipelineFolder(path.join(scratch, 'scheduled'));
    const id = `carried-${Math.random().toString(36).slice(2, 8)}`;
    const created = await runCli(['schedule', 'create', file, '--every', '1d', '--paused', '--id', id], harness.env);
    expect(created.exitCode, created.all).toBe(0);
    expect(created.stdout).toMatch(/Files: {6}6 bundled into the run \(.* KiB, bundle [0-9a-f]{12}\); edits to them reach the runs after `agent-pipeline schedule update FILE`/);
    /** The description `schedule describe --json` prints, read in this process for the waits: a command costs a Node process. */
    const describeHere = async (): Promise<ScheduleJson> => scheduleJson(await harness.client.schedule.getHandle(id).describe());
    const before = await describeHere();
    expect(before.bundle).toMatchObject({ files: 6 });

    await writeFile(path.join(scratch, 'scheduled', 'pipeline', 'steps', 'notes.md'), `${MARKERS.step} Edited.`);
    const updated = await runCli(['schedule', 'update', file, '--id', id, '--json'], harness.env);
    expect(updated.exitCode, updated.all).toBe(0);
    await eventually(describeHere, (s) => s.bundle?.hash !== before.bundle?.hash, 30_000, 'the schedule carrying the new bundle');
    // Then what the command shows, and the schedule's end, back to back in one process.
    const [described, deleted] = await runCliCommands([['schedule', 'describe', id, '--json'], ['schedule', 'delete', id]], harness.env);
    const after = parseJson<ScheduleJson>(described);
    expect(after.bundle).toEqual(parseJson<{ bundle: RunBundleSummary }>(updated).bundle);
    expect(after).toMatchObject({ paused: true, spec: 'every 1d', inputs: { audience: 'users' } });
    expect(deleted.exitCode, deleted.all).toBe(0);
  }, 120_000);
});
