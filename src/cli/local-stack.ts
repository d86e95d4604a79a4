import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../dev/dev-server.js';
import { startModelServer, type ModelServer } from '../dev/model-server.js';
import { loadScenario } from '../dev/scenario.js';
import { ALLOWED_PATHS_VARIABLE, parseFolderList } from '../activities/workspace/allowed-paths.js';
import { PIPELINE_DIRS_VARIABLE } from '../activities/prompt/worker-files.js';
import { createPipelineWorker } from '../worker/create-worker.js';
import { sandboxModeFromEnv, SANDBOX_VARIABLE } from '../activities/backends/claude-cli/sandbox-mode.js';
import { ConfigError } from '../config.js';
import { startWorkerTelemetry, type WorkerTelemetry } from '../telemetry/worker-telemetry.js';

export interface LocalStackOptions {
  /** Temporal gRPC port; the Web UI is on port + 1000. @default 7233 */
  port?: number;
  /** Start a worker in this process. @default true */
  worker?: boolean;
  /** Scenario for the scripted model server, used when no ANTHROPIC_API_KEY is set. */
  scenarioFile?: string;
  log: (line: string) => void;
}

/** The dev server, optionally the scripted model server, and a worker: everything a local run needs. */
export interface LocalStack {
  server: DevServer;
  modelServer?: ModelServer;
  worker?: Worker;
  /** Resolves when the worker stops (after a shutdown signal or `stop`). */
  workerDone: Promise<void>;
  stop(): Promise<void>;
}

/** Value of ANTHROPIC_API_KEY handed to agents talking to the local scripted server; it checks no key. */
const SCRIPTED_SERVER_KEY = 'scripted-model-server';

/** How the local worker's default sandbox mode is said. */
const LOCAL_SANDBOX = `auto, as on one person's own machine: sandboxed where bubblewrap and socat are installed, else unsandboxed with a warning in each stage (set ${SANDBOX_VARIABLE}=required to fail instead)`;

export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  // A scenario that cannot be read is refused before anything starts (see stopOnFailure).
  const scenario = !process.env.ANTHROPIC_API_KEY && options.scenarioFile ? await loadScenario(options.scenarioFile) : undefined;
  // Traces and metrics when their variables are set, as for `agent-pipeline worker` (docs/observability.md).
  const telemetry = await startWorkerTelemetry(process.env);
  // Keep the worker's own chatter (state changes) out of the user's terminal.
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { metrics: telemetry.runtimeMetrics } });
  const server = await startDevServer({ port: options.port ?? 7233, log: options.log });
  options.log(`Temporal dev server on ${server.address}; Web UI ${server.uiUrl ?? '(headless)'}; state in ${server.dbFile ?? 'memory'}`);
  const started: Started = { server, telemetry };
  return stopOnFailure(started, async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TEMPORAL_ADDRESS: server.address };
    if (scenario && options.scenarioFile) {
      started.modelServer = await startModelServer({ scenario });
      env.ANTHROPIC_BASE_URL = started.modelServer.url;
      env.ANTHROPIC_API_KEY = SCRIPTED_SERVER_KEY;
      options.log(`No ANTHROPIC_API_KEY set: agents talk to the bundled scripted model server at ${started.modelServer.url} (replies from ${options.scenarioFile}); every stage still runs the real claude binary.`);
    } else if (process.env.ANTHROPIC_API_KEY) {
      options.log('Using the Anthropic API with ANTHROPIC_API_KEY from the environment.');
    }
    if (options.worker ?? true) started.worker = await startLocalWorker(env, started, options.log);
    return localStack(started);
  });
}

/** What the stack has started so far: each part that did is stopped with it. */
interface Started {
  server: DevServer;
  telemetry: WorkerTelemetry;
  modelServer?: ModelServer;
  worker?: Worker;
  workerDone?: Promise<void>;
}

/**
 * Runs `rest` after the dev server started; when it throws, stops what started before rethrowing. Without this, a
 * worker setting or anything else refused after the server was up left the error printed and the command hanging:
 * the Temporal child process (and the model server) kept the process alive.
 */
async function stopOnFailure(started: Started, rest: () => Promise<LocalStack>): Promise<LocalStack> {
  try {
    return await rest();
  } catch (err) {
    await localStack(started).stop().catch(() => {});
    throw err;
  }
}

/** The local worker, polling: `dev`'s defaults are one person's own machine's. */
async function startLocalWorker(env: NodeJS.ProcessEnv, started: Started, log: (line: string) => void): Promise<Worker> {
  // `dev` is one person's worker on their own machine: any folder, unless AGENT_PIPELINE_ALLOWED_PATHS says otherwise;
  // `--files-from-worker` runs of pipelines in the folder it was started in (the project), unless
  // AGENT_PIPELINE_PIPELINE_DIRS says otherwise. It also keeps `auto` unless AGENT_PIPELINE_SANDBOX says otherwise: on a
  // machine without bubblewrap its agents run unsandboxed (each such stage says so) rather than failing; a worker
  // serving others fails closed (`required`). (A value of the variable is read, and a bad one refused naming it, as
  // for `agent-pipeline worker`.)
  const chosen = env[SANDBOX_VARIABLE]?.trim();
  // Read here first, so that a bad value is refused naming `dev`'s own default, not a worker's (`required`).
  readSetting(() => sandboxModeFromEnv(env, 'auto'));
  const worker = await createPipelineWorker({
    env,
    address: started.server.address,
    telemetry: started.telemetry,
    allowedPaths: parseFolderList(env[ALLOWED_PATHS_VARIABLE]) ?? 'any',
    pipelineDirs: parseFolderList(env[PIPELINE_DIRS_VARIABLE]) ?? [process.cwd()],
    sandbox: chosen ? undefined : 'auto',
  });
  started.workerDone = worker.run();
  log(`Worker polling task queue "${worker.options.taskQueue}"; agents' Bash sandbox: ${chosen ? `${chosen} (${SANDBOX_VARIABLE})` : LOCAL_SANDBOX}`);
  return worker;
}

/** `read()`, its error a ConfigError (exit 2, as the worker's own settings are). */
function readSetting<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/** The stack of what started; `stop` stops each part, the worker first. */
function localStack(started: Started): LocalStack {
  const { server, modelServer, worker, telemetry } = started;
  const workerDone = started.workerDone ?? Promise.resolve();
  return {
    server,
    modelServer,
    worker,
    workerDone,
    async stop() {
      if (worker && worker.getState() === 'RUNNING') worker.shutdown();
      await workerDone.catch(() => {});
      await worker?.connection?.close();
      await telemetry.shutdown();
      await modelServer?.close();
      await server.stop();
    },
  };
}
