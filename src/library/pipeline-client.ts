import type { Client } from '@temporalio/client';
import path from 'node:path';
import { LeaseClient, type LeaseKeyState } from '../activities/leases/lease-client.js';
import { runUrl } from '../config.js';
import { newRunId, startRun, type RunIdConflictPolicy, type StartRunOptions } from './runs.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { connectTemporal, type ConnectionOptions, type TemporalConnection } from './connection.js';
import { InvalidRequestError } from './errors.js';
import { toLibraryError, typedErrors } from './temporal-errors.js';
import { withCliMessage } from '../errors.js';
import { clientCodecs } from './history-codec.js';
import { iterateRuns, listRuns, type RunListFilter, type RunListItem, type RunPagingFilter } from './list-runs.js';
import { definitionName, type PipelineSource } from './pipeline-definition.js';
import type { InputValue } from './input-files.js';
import type { PrepareRunOptions } from './pipeline-source.js';
import type { ForkPreview } from './fork-run.js';
import type { ValidateOptions, ValidationReport } from './validate-pipeline.js';
import { RunHandle } from './run-handle.js';
import { PipelineSchedules } from './schedules.js';
import { signerFrom, type RunSigner, type SignatureTtls } from '../trust/signer.js';
import type { ClientStoreSettings } from './client-store.js';
import { agentPipelineCommand } from '../pipeline/shell-words.js';

/** Options of {@link PipelineClient.connect}. */
export interface PipelineClientOptions<B extends string = never> extends ConnectionOptions {
  /** Task queue new runs and schedules go to. @default `AGENT_PIPELINE_TASK_QUEUE`, else `agent-pipeline` */
  taskQueue?: string;
  /**
   * Backend names the workers were given besides the built-in ones, so pipelines may select them. Their names become
   * the client's type parameter: `start()` then accepts `backend: 'echo'` and still refuses a misspelt one.
   */
  backends?: readonly B[];
  /**
   * Signs runs, schedules and decisions, for workers with AGENT_PIPELINE_TRUSTED_KEYS / _DECISION_KEYS: an Ed25519
   * key in the form `agent-pipeline keys generate signing` prints (`<keyId>:<base64>`).
   * @default `AGENT_PIPELINE_SIGNING_KEY`, else nothing is signed
   */
  signingKey?: string;
  /** How long signatures of runs and schedules hold (see docs/security.md). @default 1 hour for a run, 365 days for a schedule */
  signatureTtls?: SignatureTtls;
}

/** Options of {@link PipelineClient.start}. */
export interface StartOptions extends PrepareRunOptions {
  /** The run (workflow) id; what happens when a run with it still runs is {@link idConflictPolicy}'s. @default `<pipeline>-<time>-<random>` */
  id?: string;
  /**
   * When a run with `id` is still running (Temporal's `workflowIdConflictPolicy`): `USE_EXISTING` returns that run
   * (`run.alreadyRunning` is true, nothing new starts), `FAIL` throws `InvalidRequestError` `RUN_EXISTS`,
   * `TERMINATE_EXISTING` terminates it and starts this one. An id whose run has ended always starts a new run.
   * @default 'USE_EXISTING'
   */
  idConflictPolicy?: RunIdConflictPolicy;
  /** @default the client's task queue */
  taskQueue?: string;
}

/** Options of {@link PipelineClient.fork}. */
export interface ForkOptions<B extends string = never> {
  /** The stage to fork from. */
  from: string | undefined;
  /** The pipeline the fork runs. @default the source run's pipeline file, read again (with the edits made since) */
  pipeline?: PipelineSource<B>;
  /** Inputs over the source run's. */
  inputs?: Record<string, InputValue>;
  /** The new run's id. @default `<pipeline>-<time>-<random>` */
  id?: string;
  /** Take over stages whose definition changed (recorded on the new run); changed inputs they read are still refused. */
  force?: boolean;
  /** @default the client's task queue */
  taskQueue?: string;
}

/**
 * Starts, finds, lists and schedules pipeline runs. The `agent-pipeline` command is built on this class, so the
 * library and the commands behave alike.
 */
export class PipelineClient<B extends string = never> {
  /** Schedules that start pipeline runs. */
  readonly schedules: PipelineSchedules;

  private constructor(
    private readonly connection: TemporalConnection,
    private readonly backends: readonly string[],
    /** The task queue new runs go to. */
    readonly taskQueue: string,
    private readonly signer?: RunSigner,
    /** What the client's object store is opened from: the environment and key it connected with. */
    private readonly storeSettings: Pick<ClientStoreSettings, 'env' | 'encryptionKey'> = {},
  ) {
    this.schedules = new PipelineSchedules(connection.client, taskQueue, connection.address, backends, signer);
  }

  /**
   * Connects with the same rules as the CLI: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, TLS
   * variables and temporal.toml profiles, unless `options` say otherwise.
   * @throws TemporalUnavailableError when nothing answers; ConfigError when the settings cannot be read.
   */
  static async connect<B extends string = never>(options: PipelineClientOptions<B> = {}): Promise<PipelineClient<B>> {
    // Read before connecting: a key that cannot be read is a setting to fix, whatever the server says.
    const signer = signerFrom(options.signingKey, options.env ?? process.env, options.signatureTtls);
    const connection = await connectTemporal(options);
    const storeSettings = { env: options.env ?? process.env, encryptionKey: options.encryptionKey };
    return new PipelineClient<B>(connection, options.backends ?? [], options.taskQueue ?? connection.taskQueue, signer, storeSettings);
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
   * Checks a pipeline file or definition as `agent-pipeline validate` does (the same checks and problems), without
   * starting anything: the schema and stage graph, the files it names, every template variable. Resolves with the
   * report whatever it finds; the pipeline is valid when `problems` is empty. Needs no worker.
   */
  async validate(source: PipelineSource<B>, options: Pick<ValidateOptions, 'baseDir' | 'checkFiles'> = {}): Promise<ValidationReport> {
    // The parser and the schemas are loaded by the calls that read a pipeline, not by every client (`status`, `list`).
    const { validatePipeline } = await import('./validate-pipeline.js');
    return validatePipeline(source, { ...options, backends: this.backends });
  }

  /**
   * Starts a run of a pipeline file or definition, or returns the run already running under `options.id`. Runs the
   * checks of {@link validate} first and starts nothing when they find a problem.
   * @throws PipelineInvalidError listing every problem; InvalidRequestError (`INPUT_INVALID`, `FILE_UNREADABLE`)
   */
  async start(source: PipelineSource<B>, options: StartOptions = {}): Promise<RunHandle> {
    const input = await this.prepare(source, options);
    return this.startPrepared(input, options);
  }

  /** Loads and validates what `start` would run (the checks of {@link validate}, then the inputs), without starting it. */
  async prepare(source: PipelineSource<B>, options: PrepareRunOptions = {}): Promise<PipelineRunInput> {
    const { prepareRunInput } = await import('./pipeline-source.js');
    return prepareRunInput(source, { ...options, backends: [...this.backends, ...(options.backends ?? [])] }, clientCodecs(this.temporal));
  }

  /** Starts a run from an already prepared input (see {@link prepare}). */
  startPrepared(input: PipelineRunInput, options: Pick<StartOptions, 'id' | 'taskQueue' | 'idConflictPolicy'> & Pick<StartRunOptions, 'newIdOnly'> = {}): Promise<RunHandle> {
    return typedErrors(async () => {
      const { handle, alreadyRunning } = await startRun(this.temporal, input, {
        taskQueue: options.taskQueue ?? this.taskQueue,
        id: options.id,
        idConflictPolicy: options.idConflictPolicy,
        newIdOnly: options.newIdOnly,
        signer: this.signer,
      });
      return new RunHandle(this.temporal, handle.workflowId, alreadyRunning, this.address, this.signer, this.storeSettings);
    }, this.address);
  }

  /**
   * Forks run `runId` from stage `options.from` (docs/forking.md): a new run that takes over the stages completed before
   * that stage first started, starts from the workspace as it was then, and runs the rest under `options.pipeline` (the
   * source's pipeline file, read again, by default) with the source's inputs and `options.inputs` over them.
   * @throws InvalidRequestError FORK_REFUSED naming the stage and field; PipelineInvalidError for the new pipeline
   */
  fork(runId: string, options: ForkOptions<B>): Promise<RunHandle> {
    return typedErrors(async () => {
      const [{ id, input, preview }, { refuseChanges }] = await Promise.all([this.prepareFork(runId, options), import('./fork-run.js')]);
      refuseChanges(preview);
      return this.startPrepared({ ...input, fork: { runId, stage: preview.from, ...(options.force ? { force: true } : {}) } }, { id, taskQueue: options.taskQueue, idConflictPolicy: 'FAIL', newIdOnly: true });
    }, this.address);
  }

  /**
   * A fork that takes over every stage of run `runId` that completed and runs everything else: forked from the first
   * stage it did not complete (see {@link fork}). Not `retry` of a waiting stage: that is a decision on a live run.
   */
  rerun(runId: string, options: Omit<ForkOptions<B>, 'from'> = {}): Promise<RunHandle> {
    return this.fork(runId, { ...options, from: undefined });
  }

  /** What {@link fork} (or {@link rerun}, without `from`) would take over, run again and refuse, without starting it. */
  async planFork(runId: string, options: Partial<ForkOptions<B>> = {}): Promise<ForkPreview> {
    return typedErrors(async () => (await this.prepareFork(runId, options)).preview, this.address);
  }

  private async prepareFork(runId: string, options: Partial<ForkOptions<B>>): Promise<{ id: string; input: PipelineRunInput; preview: ForkPreview }> {
    const { previewFork, readForkSource, refuseMissingForkPoint } = await import('./fork-run.js');
    const source = await readForkSource(this.temporal, runId);
    const inputs = { ...source.input.inputs, ...options.inputs };
    const pipeline = options.pipeline ?? sourcePipeline(source.input);
    const input = await this.prepare(pipeline as PipelineSource<B>, { inputs, baseDir: source.input.baseDir }).catch((err: unknown) => {
      throw options.pipeline === undefined && typeof pipeline === 'string' ? withSourceFileContext(err, runId) : err;
    });
    // Its id now, not at the start: the fork's branch is rendered from it, and must differ from the source's.
    const id = options.id ?? newRunId(input.pipeline.name);
    const preview = previewFork(runId, source, { runId: id, input }, { stage: options.from, force: options.force });
    // The source's checkpoints: those of the run that bore the id last, which `readForkSource` read.
    await refuseMissingForkPoint(this.storeSettings, source.state, preview.from);
    return { id, input, preview };
  }

  /** A handle on an existing run; nothing is checked until it is used (then RunNotFoundError if there is none). */
  getRun(id: string): RunHandle {
    return new RunHandle(this.temporal, id, false, this.address, this.signer, this.storeSettings);
  }

  /** Runs (running ones first, then the most recently ended), filtered by pipeline, status and start time: at most `filter.limit` (20) of them. */
  list(filter: RunListFilter = {}): Promise<RunListItem[]> {
    return typedErrors(() => listRuns(this.temporal, filter), this.address);
  }

  /**
   * Every run the filter matches, in the order of `list`, read from Temporal page by page (`pageSize` runs a request) as the
   * loop asks for more, like `@temporalio/client`'s `workflow.list`: `break` stops reading.
   * @throws the library's typed errors, as {@link list}
   */
  async *listAll(filter: RunPagingFilter = {}): AsyncGenerator<RunListItem, void, undefined> {
    try {
      yield* iterateRuns(this.temporal, filter);
    } catch (err) {
      throw toLibraryError(err, this.address);
    }
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

/**
 * A fork without a file reads the source run's pipeline file again: when that file is gone (moved, renamed, another
 * machine), the error says so and how to name the file, keeping what the read said.
 */
/**
 * What a fork runs when not told: the source's pipeline file, read again (with the edits made since), or, for a run
 * started from a definition (`<definition NAME>`, which names no file), that definition as the run carried it.
 */
function sourcePipeline(input: PipelineRunInput): PipelineSource<string> {
  if (input.pipelineFile === definitionName(input.pipeline)) return input.pipeline as PipelineSource<string>;
  return path.resolve(input.baseDir, path.basename(input.pipelineFile));
}

function withSourceFileContext(err: unknown, runId: string): unknown {
  if (!(err instanceof InvalidRequestError) || err.code !== 'FILE_UNREADABLE') return err;
  const library = `${err.message}. A fork reads run ${runId}'s pipeline file again, from where it was started: pass the file to run as \`pipeline\``;
  const cli = `${err.message}. A fork reads run ${runId}'s pipeline file again, from where it was started: name the file to run after the run id (${agentPipelineCommand('fork', runId, ['--from STAGE'], ['FILE'])})`;
  return withCliMessage(new InvalidRequestError('FILE_UNREADABLE', library, { cause: err }), cli);
}
