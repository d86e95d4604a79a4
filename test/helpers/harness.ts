import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { IllegalStateError, type DataConverter } from '@temporalio/common';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { loadPipelineFile, resolveInputs } from '../../src/library/load-pipeline.js';
import { startRun } from '../../src/library/runs.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { bookkeepingRun, runPaths, toFolderName } from '../../src/activities/workspace/run-folder.js';
import { runsFolder } from '../../src/activities/workspace/worker-folder.js';
import type { RunRef, RunState } from '../../src/pipeline/run-state.js';
import { getStatusQuery } from '../../src/contracts/messages.js';
import { grpcErrorOf, GRPC_STATUS } from '../../src/grpc-errors.js';
import { expectRunsReplay } from './replay-check.js';
import { closeTestConnection, stopTestWorker } from './teardown.js';
import { TEST_SANDBOX_MODE } from './sandbox-host.js';
import { clientDataConverter, storePayloadCodecs, workerDataConverter } from '../../src/codec/data-converter.js';
import { storeFolder } from '../../src/activities/workspace/worker-folder.js';

import { ENCRYPTED_WORKFLOW_BUNDLE, PROJECT_ROOT, WORKFLOW_BUNDLE } from './project-paths.js';

export { ENCRYPTED_WORKFLOW_BUNDLE, PROJECT_ROOT, WORKFLOW_BUNDLE };

/** A test's own world: a task queue, a workspaces folder, a scripted model server, a worker and a client. */
export interface Harness {
  client: Client;
  taskQueue: string;
  workspacesRoot: string;
  /**
   * Which run of `runId` the test means (its folders and checkpoints are that run's): the last one the harness started
   * under the id, else the newest whose bookkeeping the workspaces root holds, else the id alone.
   */
  runRef(runId: string): RunRef;
  /** The folder of run `runId` (as `runRef` picks it) under `workspacesRoot`. */
  runDir(runId: string): string;
  /** The bookkeeping folder of run `runId` (as `runRef` picks it): in the workers' own folder under `workspacesRoot`. */
  runBookkeeping(runId: string): string;
  modelServer: ModelServer;
  /** The environment the worker (and so the agents) got. */
  env: NodeJS.ProcessEnv;
  worker?: Worker;
  /** Starts a run of a pipeline file and returns its handle. */
  start(file: string, inputs?: Record<string, string>, id?: string): Promise<WorkflowHandle>;
  /** Writes `yaml` as `<name>.yaml` in a folder the harness owns (and removes on close); returns its path. */
  writePipeline(name: string, yaml: string): Promise<string>;
  /** Writes a pipeline file (see `writePipeline`) and starts a run of it. */
  startYaml(name: string, yaml: string, id?: string): Promise<WorkflowHandle>;
  /** Waits for a run to end (completed or failed) and returns its final state. */
  finish(handle: WorkflowHandle): Promise<RunState>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  scenario: ScenarioInput | string;
  /** Start an in-process worker. @default true */
  worker?: boolean;
  /** Extra environment for the worker. */
  env?: NodeJS.ProcessEnv;
  /**
   * Encrypts history (`AGENT_PIPELINE_ENCRYPTION_KEY`): the worker gets it and the encrypted workflow bundle, and
   * `client` encrypts as a key holder's does.
   */
  encryptionKey?: string;
  /** How often a run waiting for a pipeline-level key reports its place (the worker's `leasePollMs`). @default 10 s */
  leasePollMs?: number;
  /**
   * At close, replay every run on the harness's task queue on its workflow bundle and fail on any that does not replay
   * (replay-check.ts). Off only where a test feeds the queue's runs to other workflow code on purpose. @default true
   */
  replayCheck?: boolean;
}

/**
 * Worker state changes at INFO would bury test output; warnings and errors still show. Test files share their
 * process (vitest.config.ts), so the runtime may be there already: installed by an earlier file, or made with the
 * SDK's defaults by one that connected without a harness; its logger then stays as it is.
 */
export function installQuietRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch (error) {
    if (!(error instanceof IllegalStateError)) throw error;
  }
}

/**
 * The state of a run that ended. A query of an ended run waits for a worker to replay it, which a loaded machine may
 * not give it before the server's deadline: asked again then, up to three times.
 */
async function finalState(handle: WorkflowHandle): Promise<RunState> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await handle.query(getStatusQuery);
    } catch (err) {
      if (attempt >= 3 || grpcErrorOf(err)?.code !== GRPC_STATUS.DEADLINE_EXCEEDED) throw err;
    }
  }
}

/**
 * The data converter the harness's runs replay with: the codecs of the workers its environment makes, whose key a
 * test may give the worker alone (its `env`, not `encryptionKey`).
 */
function replayConverter(env: NodeJS.ProcessEnv, workspacesRoot: string): DataConverter | undefined {
  const codecs = storePayloadCodecs(env, { role: 'client', defaultStoreDir: storeFolder(workspacesRoot), encryptionKey: env.AGENT_PIPELINE_ENCRYPTION_KEY });
  return workerDataConverter(codecs);
}

/**
 * The run of `runId` whose bookkeeping under `root` was made last (a run id may be used again once its run ended, and
 * each run has folders of its own); undefined when none is there yet.
 */
function newestOnDisk(root: string, runId: string): RunRef | undefined {
  const names = existsSync(runsFolder(root)) ? readdirSync(runsFolder(root)) : [];
  const runs = names.flatMap((name) => {
    const bookkeeping = path.join(runsFolder(root), name);
    const run = bookkeepingRun(bookkeeping);
    if (!run || run.runId !== runId || toFolderName(run.runId, run.firstExecutionRunId) !== name) return [];
    const record = path.join(bookkeeping, 'run.json');
    return [{ run, made: existsSync(record) ? statSync(record).mtimeMs : 0 }];
  });
  return runs.sort((a, b) => b.made - a.made)[0]?.run;
}

/** Sets up a harness against the shared dev server of this test run (see global-setup.ts). */
export async function createHarness(name: string, options: HarnessOptions): Promise<Harness> {
  installQuietRuntime();
  const address = inject('temporalAddress');
  const taskQueue = `test-${name}-${Math.random().toString(36).slice(2, 8)}`;
  const workspacesRoot = await mkdtemp(path.join(tmpdir(), `agent-pipeline-${name}-`));
  const pipelinesDir = await mkdtemp(path.join(tmpdir(), `agent-pipeline-${name}-pipelines-`));
  // A HOME without dotfiles, as a service user's: an agent's Bash tool sources `~/.bashrc` into a shell snapshot, and
  // this machine's runs pyenv (about 0.4 CPU-s a snapshot, and a stale lock when a test kills the shell).
  const home = await mkdtemp(path.join(tmpdir(), `agent-pipeline-${name}-home-`));
  const modelServer = await startModelServer({ scenario: options.scenario, log: () => {} });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: home,
    TEMPORAL_ADDRESS: address,
    AGENT_PIPELINE_TASK_QUEUE: taskQueue,
    AGENT_PIPELINE_WORKSPACES: workspacesRoot,
    ANTHROPIC_BASE_URL: modelServer.url,
    ANTHROPIC_API_KEY: 'sk-test-harness-key',
    // Tests keep their repositories and extra folders in the system's temp folder, outside the workspaces root.
    AGENT_PIPELINE_ALLOWED_PATHS: tmpdir(),
    // The harness starts its runs without a bundle (the worker reads the pipeline's folder): test pipelines are written
    // in the system's temp folder, the examples are in the project.
    AGENT_PIPELINE_PIPELINE_DIRS: [tmpdir(), PROJECT_ROOT].join(path.delimiter),
    AGENT_PIPELINE_SANDBOX: TEST_SANDBOX_MODE,
    ...(options.encryptionKey ? { AGENT_PIPELINE_ENCRYPTION_KEY: options.encryptionKey } : {}),
    ...options.env,
  };
  // The workers' bundle, for the harness's worker and the replay at close: an encrypting worker's, with a key in `env`.
  const bundle = env.AGENT_PIPELINE_ENCRYPTION_KEY ? ENCRYPTED_WORKFLOW_BUNDLE : WORKFLOW_BUNDLE;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  if (options.worker ?? true) {
    worker = await createPipelineWorker({
      env,
      taskQueue,
      workflowBundlePath: existsSync(bundle) ? bundle : undefined,
      leasePollMs: options.leasePollMs,
      // One workflow thread, not the SDK's two: each loads the bundle into a V8 context of its own, 0.34 of the 0.75
      // CPU-s a worker costs to start and stop, and a test's few runs never keep two busy.
      workerOptions: { workflowThreadPoolSize: 1 },
    });
    running = worker.run();
  }
  const connection = await Connection.connect({ address });
  // As a client on the worker's machine: it resolves the payloads the worker moved to the store (the claim check).
  const codecs = storePayloadCodecs(env, { role: 'client', defaultStoreDir: storeFolder(workspacesRoot), encryptionKey: options.encryptionKey });
  const client = new Client({ connection, dataConverter: clientDataConverter(codecs) });
  const started = new Map<string, RunRef>();
  const harness: Harness = {
    client,
    taskQueue,
    workspacesRoot,
    runRef: (runId) => started.get(runId) ?? newestOnDisk(workspacesRoot, runId) ?? { runId },
    runDir: (runId) => runPaths(workspacesRoot, harness.runRef(runId)).dir,
    runBookkeeping: (runId) => runPaths(workspacesRoot, harness.runRef(runId)).bookkeeping,
    modelServer,
    env,
    worker,
    async start(file, inputs = {}, id) {
      const { pipeline, baseDir } = await loadPipelineFile(file);
      const { handle } = await startRun(
        client,
        { pipeline, baseDir, pipelineFile: file, inputs: resolveInputs(pipeline, file, inputs) },
        { taskQueue, id: id ?? `${name}-${Math.random().toString(36).slice(2, 10)}` },
      );
      // A handle the client's start returned names the run's first execution: its folders are named after it.
      const first = (handle as { firstExecutionRunId?: string }).firstExecutionRunId;
      if (first) started.set(handle.workflowId, { runId: handle.workflowId, firstExecutionRunId: first });
      return handle;
    },
    async writePipeline(pipelineName, yaml) {
      const file = path.join(pipelinesDir, `${pipelineName}.yaml`);
      await writeFile(file, yaml);
      return file;
    },
    async startYaml(pipelineName, yaml, id) {
      return harness.start(await harness.writePipeline(pipelineName, yaml), {}, id);
    },
    async finish(handle) {
      try {
        await handle.result();
      } catch (err) {
        if (!(err instanceof WorkflowFailedError)) throw err;
      }
      return finalState(handle);
    },
    async close() {
      await stopTestWorker(`the harness worker of ${taskQueue}`, worker, running);
      try {
        if (options.replayCheck ?? true) await expectRunsReplay(client, taskQueue, { bundlePath: bundle, dataConverter: replayConverter(env, workspacesRoot) });
      } finally {
        await closeTestConnection(`the harness client of ${taskQueue}`, connection);
        // After the replay check: the last native connection of the process closing shuts the SDK's runtime down.
        await closeTestConnection(`the harness worker of ${taskQueue}`, worker?.connection);
        await modelServer.close();
        await rm(workspacesRoot, { recursive: true, force: true });
        await rm(pipelinesDir, { recursive: true, force: true });
        await rm(home, { recursive: true, force: true });
      }
    },
  };
  return harness;
}
