import { Client, Connection, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { loadPipelineFile, resolveInputs } from '../../src/library/load-pipeline.js';
import { startRun } from '../../src/library/runs.js';
import { startDevServer, type DevServer } from '../../src/dev/dev-server.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { spawnWorker, type WorkerProcess } from './worker-process.js';

/** The project root: the nearest folder up with a package.json (this file runs from `dist/bench/bench/lib/`). */
export const PROJECT_ROOT = findProjectRoot(fileURLToPath(new URL('.', import.meta.url)));
/** The production worker entry point; benchmarks run workers as separate processes, as deployed. */
export const WORKER_SCRIPT = path.join(PROJECT_ROOT, 'dist', 'worker.js');
export const CLAUDE_BINARY = path.join(PROJECT_ROOT, 'node_modules', '.bin', 'claude');
/** The key agents send to the scripted model server, which checks none. */
const API_KEY = 'sk-bench-scripted';

/**
 * This process's environment, with the project's state folder (where the Temporal CLI is cached) made explicit:
 * the sources' default would point next to this compiled copy of them, under dist/bench.
 */
export function projectEnv(): NodeJS.ProcessEnv {
  return { ...process.env, AGENT_PIPELINE_HOME: process.env.AGENT_PIPELINE_HOME ?? path.join(PROJECT_ROOT, '.agent-pipeline') };
}

/** A pipeline file as an object; written as YAML. */
export type PipelineSpec = Record<string, unknown>;

/**
 * Everything the benchmarks share: one Temporal dev server for the whole run (in memory, headless), one
 * scripted model server whose scenario each benchmark replaces, a client, and a scratch folder.
 */
export class BenchStack {
  private readonly workers = new Set<WorkerProcess>();
  private counter = 0;

  private constructor(
    readonly devServer: DevServer,
    readonly modelServer: ModelServer,
    readonly client: Client,
    private readonly connection: Connection,
    /** Scratch folder: pipelines, workspaces, logs. Removed by {@link close}. */
    readonly scratch: string,
  ) {}

  static async start(log: (line: string) => void): Promise<BenchStack> {
    const scratch = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-bench-'));
    const devServer = await startDevServer({ port: 'auto', headless: true, dbFile: null, logFile: path.join(scratch, 'temporal.log'), env: projectEnv(), log });
    const modelServer = await startModelServer({
      scenario: { rules: [] },
      log: () => {},
      maxRecordedRequests: 10_000,
    });
    const connection = await Connection.connect({ address: devServer.address });
    return new BenchStack(devServer, modelServer, new Client({ connection }), connection, scratch);
  }

  /** A fresh name for a task queue, run id or folder. */
  uniqueName(prefix: string): string {
    this.counter += 1;
    return `${prefix}-${this.counter}-${Math.random().toString(36).slice(2, 6)}`;
  }

  /** A new empty folder in the scratch area. */
  async folder(name: string): Promise<string> {
    const dir = path.join(this.scratch, this.uniqueName(name));
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /** The environment of a worker process for `taskQueue`, whose agents talk to the scripted model server. */
  workerEnv(taskQueue: string, workspacesRoot: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LANG: process.env.LANG,
      TEMPORAL_ADDRESS: this.devServer.address,
      AGENT_PIPELINE_TASK_QUEUE: taskQueue,
      AGENT_PIPELINE_WORKSPACES: workspacesRoot,
      ANTHROPIC_BASE_URL: this.modelServer.url,
      ANTHROPIC_API_KEY: API_KEY,
      // What the benchmarks measured before a worker's default became `required`: sandboxed where the host can.
      AGENT_PIPELINE_SANDBOX: 'auto',
      // Runs are started without a bundle (startPipeline): the worker reads their pipelines from the scratch folder.
      AGENT_PIPELINE_PIPELINE_DIRS: this.scratch,
      ...extra,
    };
  }

  /** Starts `node dist/worker.js` (or `script`) for `taskQueue`; stopped by {@link close} if still running. */
  async startWorker(taskQueue: string, workspacesRoot: string, extra: NodeJS.ProcessEnv = {}, script = WORKER_SCRIPT): Promise<WorkerProcess> {
    const worker = await spawnWorker({
      workerScript: script,
      env: this.workerEnv(taskQueue, workspacesRoot, extra),
      logFile: path.join(this.scratch, `worker-${taskQueue}.log`),
      // e.g. BENCH_WORKER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/profiles' to see where a worker's CPU goes.
      nodeArgs: process.env.BENCH_WORKER_NODE_ARGS?.split(/\s+/).filter(Boolean),
    });
    this.workers.add(worker);
    void worker.exited.then(() => this.workers.delete(worker));
    return worker;
  }

  /** Replaces the model server's scenario and clears its request record. */
  useScenario(scenario: ScenarioInput): void {
    this.modelServer.setScenario(scenario);
  }

  /** Writes a pipeline file into the scratch area and returns its path. */
  async writePipeline(spec: PipelineSpec): Promise<string> {
    const file = path.join(await this.folder(`pipeline-${String(spec.name)}`), 'pipeline.yaml');
    await writeFile(file, stringify(spec));
    return file;
  }

  /** Starts a run of a pipeline file on `taskQueue`, the way `agent-pipeline start` does (`inputs` as `--input`). */
  async startPipeline(file: string, taskQueue: string, id = this.uniqueName('run'), inputs: Record<string, string> = {}, client = this.client): Promise<WorkflowHandle> {
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const input = { pipeline, baseDir, pipelineFile: file, inputs: resolveInputs(pipeline, file, inputs) };
    const { handle } = await startRun(client, input, { taskQueue, id });
    return handle;
  }

  /** Waits for a run to end; `true` when it completed, `false` when it failed. */
  async finish(handle: WorkflowHandle): Promise<boolean> {
    try {
      await handle.result();
      return true;
    } catch (err) {
      if (err instanceof WorkflowFailedError) return false;
      throw err;
    }
  }

  /** Waits for a run to end. @throws Error naming the run and the innermost failure message when it did not complete */
  async expectCompleted(handle: WorkflowHandle): Promise<void> {
    try {
      await handle.result();
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
      let cause: unknown = err;
      while (cause instanceof Error && cause.cause instanceof Error) cause = cause.cause;
      throw new Error(`run ${handle.workflowId} failed: ${(cause as Error).message}; worker logs are in ${this.scratch}`);
    }
  }

  /** Stops the workers and servers; the scratch folder is kept when `keepScratch` (to read worker logs after a failure). */
  async close(keepScratch = false): Promise<void> {
    await Promise.all([...this.workers].map((w) => w.stop('SIGKILL')));
    await this.connection.close();
    await this.modelServer.close();
    await this.devServer.stop();
    if (!keepScratch) await rm(this.scratch, { recursive: true, force: true });
  }
}

function findProjectRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (dir === path.dirname(dir)) throw new Error(`no package.json above ${from}; run the benchmarks from the agent-pipeline checkout`);
  }
}
