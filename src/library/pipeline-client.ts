import type { Client } from '@temporalio/client';
import { LeaseClient, type LeaseKeyState } from '../activities/leases/lease-client.js';
import { runUrl } from '../config.js';
import { startRun } from './runs.js';
import type { PipelineRunInput } from '../workflows/messages.js';
import { connectTemporal, type ConnectionOptions, type TemporalConnection } from './connection.js';
import { typedErrors } from './errors.js';
import { listRuns, type RunListFilter, type RunListItem } from './list-runs.js';
import { prepareRunInput, type PipelineSource, type PrepareRunOptions } from './pipeline-source.js';
import { RunHandle } from './run-handle.js';
import { PipelineSchedules } from './schedules.js';

/** Options of {@link PipelineClient.connect}. */
export interface PipelineClientOptions extends ConnectionOptions {
  /** Task queue new runs and schedules go to. @default `AGENT_PIPELINE_TASK_QUEUE`, else `agent-pipeline` */
  taskQueue?: string;
  /** Backend names the workers were given besides the built-in ones, so pipelines may select them. */
  backends?: readonly string[];
}

/** Options of {@link PipelineClient.start}. */
export interface StartOptions extends PrepareRunOptions {
  /** The run (workflow) id; starting an id that still runs returns that run (`run.alreadyRunning`). @default `<pipeline>-<time>-<random>` */
  id?: string;
  /** @default the client's task queue */
  taskQueue?: string;
}

/**
 * Starts, finds, lists and schedules pipeline runs. The `agent-pipeline` command is built on this class, so the
 * library and the commands behave alike.
 */
export class PipelineClient {
  /** Schedules that start pipeline runs. */
  readonly schedules: PipelineSchedules;

  private constructor(
    private readonly connection: TemporalConnection,
    private readonly backends: readonly string[],
    /** The task queue new runs go to. */
    readonly taskQueue: string,
  ) {
    this.schedules = new PipelineSchedules(connection.client, taskQueue, connection.address, backends);
  }

  /**
   * Connects with the same rules as the CLI: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, TLS
   * variables and temporal.toml profiles, unless `options` say otherwise.
   * @throws TemporalUnavailableError when nothing answers; ConfigError when the settings cannot be read.
   */
  static async connect(options: PipelineClientOptions = {}): Promise<PipelineClient> {
    const connection = await connectTemporal(options);
    return new PipelineClient(connection, options.backends ?? [], options.taskQueue ?? connection.taskQueue);
  }

  /** The Temporal client underneath, for what the library does not cover. */
  get temporal(): Client {
    return this.connection.client;
  }

  /** The namespace connected to. */
  get namespace(): string {
    return this.connection.namespace;
  }

  /** The address connected to, as `host:port`. */
  get address(): string {
    return this.connection.address;
  }

  /**
   * Starts a run of a pipeline file or definition, or returns the run already running under `options.id`.
   * @throws PipelineInvalidError listing every problem; InvalidRequestError (`INPUT_INVALID`, `FILE_UNREADABLE`)
   */
  async start(source: PipelineSource, options: StartOptions = {}): Promise<RunHandle> {
    const input = await this.prepare(source, options);
    return this.startPrepared(input, options);
  }

  /** Loads and validates what `start` would run, without starting it. */
  prepare(source: PipelineSource, options: PrepareRunOptions = {}): Promise<PipelineRunInput> {
    return prepareRunInput(source, { ...options, backends: [...this.backends, ...(options.backends ?? [])] });
  }

  /** Starts a run from an already prepared input (see {@link prepare}). */
  startPrepared(input: PipelineRunInput, options: Pick<StartOptions, 'id' | 'taskQueue'> = {}): Promise<RunHandle> {
    return typedErrors(async () => {
      const { handle, alreadyRunning } = await startRun(this.temporal, input, { taskQueue: options.taskQueue ?? this.taskQueue, id: options.id });
      return new RunHandle(this.temporal, handle.workflowId, alreadyRunning, this.address);
    }, this.address);
  }

  /** A handle on an existing run; nothing is checked until it is used (then RunNotFoundError if there is none). */
  getRun(id: string): RunHandle {
    return new RunHandle(this.temporal, id, false, this.address);
  }

  /** Runs, newest first, filtered by pipeline, status and start time. */
  list(filter: RunListFilter = {}): Promise<RunListItem[]> {
    return typedErrors(() => listRuns(this.temporal, filter), this.address);
  }

  /**
   * Concurrency keys (`limits:`) somebody holds or waits for, each with its limit, holders and waiters in order;
   * with `key`, that key only (an empty list when nobody holds or waits for it). See docs/limits.md.
   */
  limits(key?: string): Promise<LeaseKeyState[]> {
    const leases = new LeaseClient(this.temporal, this.taskQueue);
    return typedErrors(async () => (key === undefined ? leases.list() : [await leases.describe(key)].filter((s): s is LeaseKeyState => s !== undefined)), this.address);
  }

  /** The run's page in the Temporal Web UI, when its address is known (`AGENT_PIPELINE_WEB_UI`, or the dev server's). */
  webUiUrl(runId: string): string | undefined {
    return runUrl({ webUiUrl: this.connection.webUiUrl, taskQueue: this.taskQueue, workspacesRoot: '' }, this.namespace, runId);
  }

  /** Closes the connection. */
  close(): Promise<void> {
    return this.connection.close();
  }
}
