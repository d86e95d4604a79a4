import { bundleWorkflowCode, DefaultLogger, type Worker } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import webpack from 'webpack';
import { checkpointsPrefix } from '../../src/activities/checkpoint/keys.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { runsFolder, storeFolder } from '../../src/activities/workspace/worker-folder.js';
import type { PruneEntry } from '../../src/cli/prune-workspaces.js';
import { FileStore } from '../../src/store/file-store.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { RunHandle } from '../../src/library/run-handle.js';
import { listTranscripts } from '../../src/library/transcript-files.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

/*
 * A run id may be used again once the run that had it ended (Temporal allows it, and `start --id` does): each run under
 * the id works in a folder of its own, with bookkeeping and checkpoints of its own, and `status`, `logs` and a fork
 * read the latest one. Runs a worker of an earlier release started (their folders named after the id alone) keep
 * their folders on a worker of this one: while they wait, when their host is lost, and after they continue as new.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const block = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
/** An API stage's answer: `text` (its `output:` file receives it), then the report. */
const answer = (text: string): Rule['turns'][number] => ({ text: `${text}\n${block(text)}` });

describe('a run id used again after its run ended', () => {
  let harness: Harness;
  beforeAll(async () => {
    const rules: Rule[] = [
      // Each run's note names the run (its input).
      { name: 'write-first', match: 'Write the note of the first run.', turns: [answer('the first run wrote this')] },
      { name: 'write-second', match: 'Write the note of the second run.', turns: [answer('the second run wrote this')] },
      { name: 'check', match: 'Pipeline: reuse · Stage: check ·', repeatLastTurn: true, turns: [{ text: block('checked') }] },
      { name: 'held', match: 'Write the held note.', repeatLastTurn: true, turns: [answer('a held note')] },
    ];
    harness = await createHarness('reused-id', { scenario: { rules } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('gives the second run a folder and bookkeeping of its own; status, logs and a fork read the second', { timeout: 400_000 }, async () => {
    const yaml = [
      'name: reuse',
      'inputs: { which: { required: true } }',
      'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
      'stages:',
      '  - { id: write, prompt: "Write the note of the {{inputs.which}} run.", output: note.txt }',
      '  - { id: check, prompt: Check the note., needs: [write] }',
      '',
    ].join('\n');
    const file = await harness.writePipeline('reuse', yaml);
    // As a user starts them: the second once the first has ended.
    const first = await runCli(['start', file, '--id', 'reuse-1', '--input', 'which=first', '--wait', '--json'], harness.env, 240_000);
    expect(first.exitCode, first.all).toBe(0);
    const second = await runCli(['start', file, '--id', 'reuse-1', '--input', 'which=second', '--wait', '--json'], harness.env, 240_000);
    expect(second.exitCode, second.all).toBe(0);
    const [a, b] = [parseJson<RunState>(first), parseJson<RunState>(second)];
    expect([a.status, b.status]).toEqual(['completed', 'completed']);

    // Two folders, each with its own run's file, and two bookkeeping folders, each with its own run's one transcript.
    expect(a.workspace).toBeDefined();
    expect(b.workspace).not.toBe(a.workspace);
    expect(await readFile(path.join(a.workspace!, 'note.txt'), 'utf8')).toContain('the first run wrote this');
    expect(await readFile(path.join(b.workspace!, 'note.txt'), 'utf8')).toContain('the second run wrote this');
    const transcripts = async (workspace: string): Promise<string[]> => {
      const found = await listTranscripts(path.join(runsFolder(harness.workspacesRoot), path.basename(workspace), 'stages', 'write'));
      return Promise.all(found.map((t) => readFile(t.file, 'utf8')));
    };
    const [ofA, ofB] = [await transcripts(a.workspace!), await transcripts(b.workspace!)];
    expect(ofA).toHaveLength(1);
    expect(ofA[0]).toContain('the first run wrote this');
    expect(ofB).toHaveLength(1);
    expect(ofB[0]).toContain('the second run wrote this');
    expect(ofB[0]).not.toContain('the first run wrote this');
    // Each names the Temporal run id of its first execution, which its folder's name carries hashed.
    expect(a.firstExecutionRunId).toEqual(expect.any(String));
    expect(b.firstExecutionRunId).not.toBe(a.firstExecutionRunId);
    expect(path.basename(b.workspace!)).toBe(toFolderName('reuse-1', b.firstExecutionRunId));

    // status and logs read the latest run; a fork from `check` starts from the second run's workspace.
    const [status, logs, fork] = await runCliCommands(
      [
        ['status', 'reuse-1', '--json'],
        ['logs', 'reuse-1', '--stage', 'write'],
        ['fork', 'reuse-1', '--from', 'check', '--id', 'reuse-1-fork', '--wait', '--json'],
      ],
      harness.env,
      240_000,
    );
    expect(status.exitCode, status.all).toBe(0);
    expect(parseJson<{ workspace?: string }>(status).workspace).toBe(b.workspace);
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain('the second run wrote this');
    expect(logs.stdout).not.toContain('the first run wrote this');
    expect(logs.stdout.match(/══ reuse-1 · stage write/g)).toHaveLength(1);
    expect(fork.exitCode, fork.all).toBe(0);
    const forked = parseJson<RunState>(fork);
    expect(forked.forkedFrom).toEqual({ runId: 'reuse-1', firstExecutionRunId: b.firstExecutionRunId, stage: 'check' });
    expect(await readFile(path.join(forked.workspace!, 'note.txt'), 'utf8')).toContain('the second run wrote this');
  });

  test('prune removes the folder of a run whose id a later run has, while that one runs, and only its checkpoints', { timeout: 300_000 }, async () => {
    const yaml = ['name: held', 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }', 'stages:', '  - { id: write, prompt: Write the held note., output: note.txt }', '  - { id: gate, needs: [write], approval: { message: Go on? } }', ''].join('\n');
    const file = await harness.writePipeline('held', yaml);
    const approve = async (): Promise<RunState> => new RunHandle(harness.client, 'held-1').approve({ stage: 'gate' });
    const firstRun = await harness.start(file, {}, 'held-1');
    await waitForWaiting(firstRun, 'gate', 'approval');
    await approve();
    const a = await harness.finish(firstRun);
    const secondRun = await harness.start(file, {}, 'held-1');
    const b = await waitForWaiting(secondRun, 'gate', 'approval');
    const store = new FileStore(storeFolder(harness.workspacesRoot));
    const checkpointsOf = async (run: RunState): Promise<string[]> => {
      const keys: string[] = [];
      for await (const key of store.list(checkpointsPrefix(run))) keys.push(key);
      return keys;
    };
    expect((await checkpointsOf(a)).length).toBeGreaterThan(0);
    const kept = await checkpointsOf(b);
    expect(kept.length).toBeGreaterThan(0);

    const pruned = await runCli(['prune', '--older-than', '0s', '--json'], harness.env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    const entries = parseJson<PruneEntry[]>(pruned);
    expect(entries.find((e) => e.firstExecutionRunId === a.firstExecutionRunId)).toMatchObject({ runId: 'held-1', earlier: true, status: 'completed', removed: true });
    expect(entries.find((e) => e.firstExecutionRunId === b.firstExecutionRunId)).toMatchObject({ runId: 'held-1', status: 'running', removed: false });
    expect(existsSync(a.workspace!)).toBe(false);
    expect(await checkpointsOf(a)).toEqual([]);
    expect(existsSync(path.join(b.workspace!, 'note.txt'))).toBe(true);
    expect(await checkpointsOf(b)).toEqual(kept);
    // The later run goes on, in its folder.
    await approve();
    expect((await harness.finish(secondRun)).status).toBe('completed');
  });
});

/** The workflow of a release before runs had folders of their own: today's, with the module that names them as it was then. */
const WORKFLOWS = fileURLToPath(new URL('../../src/workflows/index.ts', import.meta.url));
const BEFORE_RUN_FOLDERS = fileURLToPath(new URL('../fixtures/versioning/before-run-folders.ts', import.meta.url));

describe('a run started by a worker of the release before runs had folders of their own', () => {
  let harness: Harness;
  let scratch: string;
  const workers: { worker: Worker; done: Promise<void> }[] = [];
  beforeAll(async () => {
    const rules: Rule[] = [{ name: 'stage', match: { regex: 'Pipeline: (inflight|restored) · Stage: (\\w+) ·' }, repeatLastTurn: true, turns: [answer('written by its stage')] }];
    harness = await createHarness('reused-id-before', { scenario: { rules }, worker: false });
    scratch = await mkdtemp(path.join(tmpdir(), 'reused-id-before-'));
  });
  afterAll(async () => {
    for (const { worker } of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
    await Promise.all(workers.map((w) => w.done));
    await harness?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  async function startWorker(workflowBundlePath: string): Promise<Worker> {
    // Every checkpoint (`on`): a host that is lost leaves the run's files in the store. One host, restarted: the same owner.
    const env = { ...harness.env, AGENT_PIPELINE_CHECKPOINTS: 'on', AGENT_PIPELINE_STICKY_TIMEOUT: '2s' };
    const worker = await createPipelineWorker({ env, taskQueue: harness.taskQueue, workflowBundlePath, workerOptions: { workflowThreadPoolSize: 1 } });
    workers.push({ worker, done: worker.run() });
    return worker;
  }

  test('keeps its folder named after its id on a worker of this release: while it waits, after its host is lost, and after it continues as new', { timeout: 500_000 }, async () => {
    const { code } = await bundleWorkflowCode({
      workflowsPath: WORKFLOWS,
      logger: new DefaultLogger('WARN'),
      webpackConfigHook: (config) => ({ ...config, plugins: [...(config.plugins ?? []), new webpack.NormalModuleReplacementPlugin(/[\\/]run-folders\.js$/, BEFORE_RUN_FOLDERS)] }),
    });
    const before = path.join(scratch, 'workflow-bundle-before.js');
    await writeFile(before, code);
    const defaults = 'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }';
    const gate = ['  - id: gate', '    needs: [write]', '    approval: { message: Go on? }'];
    // Past the gate, enough stages to pass 100 events: the run continues as new on the worker of this release.
    const after = Array.from({ length: 10 }, (_, i) => `  - { id: s${i + 1}, prompt: Do s${i + 1}., output: s${i + 1}.txt, needs: [${i === 0 ? 'gate' : `s${i}`}] }`);
    const kept = await harness.writePipeline('inflight', ['name: inflight', 'continueAsNew: { afterEvents: 100 }', defaults, 'stages:', '  - { id: write, prompt: Write the note., output: note.txt }', ...gate, ...after, ''].join('\n'));
    const restored = await harness.writePipeline('restored', ['name: restored', defaults, 'stages:', '  - { id: write, prompt: Write the note., output: note.txt }', ...gate, '  - { id: read, prompt: Read the note., output: read.txt, needs: [gate] }', ''].join('\n'));

    const old = await startWorker(before);
    const keptRun = await harness.start(kept, {}, 'inflight-kept');
    const restoredRun = await harness.start(restored, {}, 'inflight-restored');
    await waitForWaiting(keptRun, 'gate', 'approval', 120_000);
    await waitForWaiting(restoredRun, 'gate', 'approval', 120_000);
    const folderOf = (runId: string): string => path.join(harness.workspacesRoot, toFolderName(runId));
    expect(await readFile(path.join(folderOf('inflight-kept'), 'note.txt'), 'utf8')).toContain('written by its stage');
    expect(existsSync(path.join(folderOf('inflight-restored'), 'note.txt'))).toBe(true);
    old.shutdown();
    await workers[0].done;
    // The host of `inflight-restored` is lost: its folder and bookkeeping go, its checkpoints in the store remain.
    await rm(folderOf('inflight-restored'), { recursive: true, force: true });
    await rm(path.join(runsFolder(harness.workspacesRoot), toFolderName('inflight-restored')), { recursive: true, force: true });

    await startWorker(WORKFLOW_BUNDLE);
    for (const runId of ['inflight-kept', 'inflight-restored']) await new RunHandle(harness.client, runId).approve({ stage: 'gate' });
    const [keptState, restoredState] = [await harness.finish(keptRun), await harness.finish(restoredRun)];
    expect([keptState.status, restoredState.status], JSON.stringify([keptState.error, restoredState.error])).toEqual(['completed', 'completed']);

    // In its folder to the end, through its hand-over to a new execution: every stage's file is there, and no other folder of the id.
    const executions = [];
    for await (const info of harness.client.workflow.list({ query: `WorkflowId = 'inflight-kept'` })) executions.push(info.status.name);
    expect(executions.length, executions.join()).toBeGreaterThanOrEqual(2);
    expect(keptState.firstExecutionRunId).toBeUndefined();
    expect(keptState.workspace).toBe(folderOf('inflight-kept'));
    for (let i = 1; i <= 10; i++) expect(existsSync(path.join(folderOf('inflight-kept'), `s${i}.txt`)), `s${i}.txt`).toBe(true);
    const ofTheId = (await readdir(harness.workspacesRoot)).filter((name) => name.startsWith('inflight-kept'));
    expect(ofTheId).toEqual([toFolderName('inflight-kept')]);
    // Restored from its checkpoint into the folder it had: the note the lost host's stage wrote is there for `read`.
    expect(restoredState.workspace).toBe(folderOf('inflight-restored'));
    expect(await readFile(path.join(folderOf('inflight-restored'), 'note.txt'), 'utf8')).toContain('written by its stage');
    expect(existsSync(path.join(folderOf('inflight-restored'), 'read.txt'))).toBe(true);
    // `logs` finds the transcripts of a stage that ran on either worker.
    const [logs] = await runCliCommands([['logs', 'inflight-kept', '--stage', 's10']], harness.env);
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain('written by its stage');
  });
});
