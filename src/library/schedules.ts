import { ScheduleClient, type Client, type ScheduleHandle } from '@temporalio/client';
import { RUN_INPUT_VERSION } from '../pipeline/run-input.js';
import type { RunSigner } from '../trust/signer.js';
import { buildSchedule, isPipelineSchedule, OVERLAP_POLICIES, scheduleJson, withRunInput, type OverlapFlag, type ScheduleJson } from './schedule-spec.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { findNewRunIdProblem } from '../pipeline/run-id.js';
import { durationSchema, type DurationText } from '../pipeline/schema.js';
import { InvalidRequestError } from './errors.js';
import { typedErrors } from './temporal-errors.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { prepareRunInput, type PipelineSource, type PrepareRunOptions } from './pipeline-source.js';
import { readInputValues } from './input-files.js';
import { clientCodecs } from './history-codec.js';
import { withSharedClaims } from '../codec/claim-check-codec.js';
import { GRPC_STATUS, grpcErrorOf } from '../grpc-errors.js';

/** A schedule of pipeline runs, as `schedules.list()` and `describe()` report it. */
export type ScheduleInfo = ScheduleJson;
/** What happens when a run is due while the previous one still runs. */
export type OverlapPolicy = OverlapFlag;

/** Options of {@link PipelineSchedules.create}: exactly one of `cron` and `every`. */
export interface CreateScheduleOptions extends PrepareRunOptions {
  /** Schedule id. @default the pipeline's name */
  id?: string;
  /** A cron expression, e.g. `0 2 * * *`. */
  cron?: string;
  /** An interval, e.g. `1h` or `30m`. */
  every?: DurationText;
  /** @default 'skip' */
  overlap?: OverlapPolicy;
  /** A note shown with the schedule. */
  note?: string;
  /** Create it paused. */
  paused?: boolean;
}

/** Options of {@link PipelineSchedules.update}. */
export interface UpdateScheduleOptions extends PrepareRunOptions {
  /** Schedule id. @default the pipeline's name */
  id?: string;
}

/** Exactly one of cron and every, a valid interval and overlap policy. @throws InvalidRequestError */
function checkTiming(options: Pick<CreateScheduleOptions, 'cron' | 'every' | 'overlap'>): void {
  if (Boolean(options.cron) === Boolean(options.every)) throw new InvalidRequestError('INVALID_REQUEST', '[INVALID_REQUEST] give exactly one of cron or every');
  if (options.every !== undefined && !durationSchema.safeParse(options.every).success) {
    throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] every: "${options.every}" is not a duration; write it like 30m, 2h or 1d`);
  }
  if (options.overlap !== undefined && !Object.hasOwn(OVERLAP_POLICIES, options.overlap)) {
    throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] overlap: expected one of ${Object.keys(OVERLAP_POLICIES).join(', ')}, got "${options.overlap}"`);
  }
}

/**
 * The server's refusal of a cron expression (its fields, their ranges), as the request's mistake naming `cron`. The SDK
 * turns the server's "Invalid schedule spec" into a TypeError carrying the server's words.
 */
function cronRefused(err: unknown, cron: string | undefined): InvalidRequestError | undefined {
  if (cron === undefined) return undefined;
  const grpc = grpcErrorOf(err);
  const reason = err instanceof TypeError ? err.message : grpc?.code === GRPC_STATUS.INVALID_ARGUMENT ? grpc.details : undefined;
  if (reason === undefined) return undefined;
  return new InvalidRequestError(
    'INVALID_REQUEST',
    `[INVALID_REQUEST] cron: "${cron}" is not a schedule Temporal accepts (${reason}); write five fields, minute hour day-of-month month day-of-week, such as "0 2 * * *"`,
    { cause: err },
  );
}

/** Schedules that start pipeline runs on a cron expression or an interval (`client.schedules`). */
export class PipelineSchedules {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
    private readonly address?: string,
    /** Backend names the client was told about (`PipelineClient.connect({ backends })`). */
    private readonly backends: readonly string[] = [],
    /** Signs each schedule's action, at create and again at update (`PipelineClient.connect({ signingKey })`). */
    private readonly signer?: RunSigner,
  ) {}

  #scheduleClient: ScheduleClient | undefined;

  /**
   * The client's schedule client, but claiming a large action into the shared `claims/`: the SDK names the action by
   * the schedule's id, while its runs get ids of their own (`<schedule>-<time>`), and a run reads only its own claims.
   */
  private get schedule(): ScheduleClient {
    this.#scheduleClient ??= new ScheduleClient({
      connection: this.client.connection,
      namespace: this.client.options.namespace,
      dataConverter: { payloadCodecs: withSharedClaims(this.client.options.loadedDataConverter.payloadCodecs) },
      interceptors: this.client.options.interceptors.schedule,
    });
    return this.#scheduleClient;
  }

  /**
   * Creates a schedule that starts the pipeline with the given inputs.
   * @throws PipelineInvalidError, InvalidRequestError (`SCHEDULE_EXISTS`, `INVALID_REQUEST` for bad timing)
   */
  async create(source: PipelineSource, options: CreateScheduleOptions): Promise<ScheduleInfo> {
    checkTiming(options);
    return this.createPrepared(await prepareRunInput(source, { ...options, backends: [...this.backends, ...(options.backends ?? [])] }, clientCodecs(this.client)), options);
  }

  /**
   * Creates a schedule from an already prepared run input (`client.prepare()`). With a signing key the schedule is
   * created paused with an unsigned action, then its action is signed for the schedule's creation time and its pause
   * state set as asked: no run starts before the action is signed.
   */
  createPrepared(input: PipelineRunInput, options: Omit<CreateScheduleOptions, keyof PrepareRunOptions>): Promise<ScheduleInfo> {
    checkTiming(options);
    const scheduleId = options.id ?? input.pipeline.name;
    // Its runs' ids start with the schedule's: a dot there would have every run refused by the workers, a "-" every
    // command that names one of them read as an option.
    const idProblem = findNewRunIdProblem(scheduleId, 'schedule');
    if (idProblem) throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] ${idProblem}`);
    return typedErrors(async () => {
      const handle = await this.schedule
        .create(
          buildSchedule({
            scheduleId,
            input,
            taskQueue: this.taskQueue,
            cron: options.cron,
            every: options.every === undefined ? undefined : { text: options.every, ms: toMilliseconds(options.every) },
            overlap: options.overlap ?? 'skip',
            note: options.note,
            paused: this.signer ? true : options.paused,
          }),
        )
        .catch((err: unknown) => {
          throw cronRefused(err, options.cron) ?? err;
        });
      if (this.signer) await this.signCreated(handle, input, options.paused ?? false);
      return scheduleJson(await handle.describe());
    }, this.address);
  }

  /** Signs a schedule just created (paused) for its creation time, then pauses or unpauses it as asked; deletes it on failure. */
  private async signCreated(handle: ScheduleHandle, input: PipelineRunInput, paused: boolean): Promise<void> {
    try {
      await handle.update((created) => withRunInput(created, { version: RUN_INPUT_VERSION, ...input }, this.signer, paused));
    } catch (err) {
      // A schedule left with an unsigned action would start runs every worker with trusted keys refuses.
      await handle.delete().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Prepares the pipeline again (re-bundling its files) and makes it what the schedule's next runs start; timing,
   * policies, pause state and note stay. Inputs not given keep the values the schedule had.
   * @throws PipelineInvalidError, InvalidRequestError (`SCHEDULE_NOT_FOUND`, or a schedule that starts no pipeline runs)
   */
  async update(source: PipelineSource, options: UpdateScheduleOptions = {}): Promise<{ scheduleId: string; input: PipelineRunInput }> {
    const prepare = (inputs: Record<string, string>): Promise<PipelineRunInput> =>
      prepareRunInput(source, { ...options, inputs, backends: [...this.backends, ...(options.backends ?? [])] }, clientCodecs(this.client));
    // Files (and standard input) are read once, though the pipeline is prepared twice.
    const given = await readInputValues(options.inputs ?? {});
    // Prepared once to learn the pipeline's name and declared inputs, then again with the schedule's own inputs kept.
    const fresh = await prepare(given);
    return typedErrors(async () => {
      const handle = this.schedule.getHandle(options.id ?? fresh.pipeline.name);
      const previous = await handle.describe();
      if (!isPipelineSchedule(previous)) throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] schedule ${handle.scheduleId} does not start pipeline runs`);
      const before = (previous.action.type === 'startWorkflow' ? (previous.action.args?.[0] as PipelineRunInput | undefined)?.inputs : undefined) ?? {};
      const declared = fresh.pipeline.inputs ?? {};
      const kept = Object.fromEntries(Object.entries(before).filter(([k]) => k in declared));
      const input = await prepare({ ...kept, ...given });
      await handle.update((current) => withRunInput(current, input, this.signer));
      return { scheduleId: handle.scheduleId, input };
    }, this.address);
  }

  /** Every schedule that starts pipeline runs (the namespace may hold others). */
  list(): Promise<ScheduleInfo[]> {
    return typedErrors(async () => {
      const schedules: ScheduleInfo[] = [];
      for await (const summary of this.schedule.list()) if (isPipelineSchedule(summary)) schedules.push(scheduleJson(summary));
      return schedules;
    }, this.address);
  }

  /** One schedule: pipeline, inputs, timing, next and recent runs. @throws InvalidRequestError `SCHEDULE_NOT_FOUND` */
  describe(id: string): Promise<ScheduleInfo> {
    return typedErrors(async () => scheduleJson(await this.schedule.getHandle(id).describe()), this.address);
  }

  /** Starts a run now, whatever the timing and overlap policy. */
  trigger(id: string): Promise<void> {
    return typedErrors(() => this.schedule.getHandle(id).trigger(), this.address);
  }

  /** Stops starting runs until unpaused; runs in progress go on. */
  pause(id: string, note?: string): Promise<void> {
    return typedErrors(() => this.schedule.getHandle(id).pause(note), this.address);
  }

  /** Starts runs again. */
  unpause(id: string, note?: string): Promise<void> {
    return typedErrors(() => this.schedule.getHandle(id).unpause(note), this.address);
  }

  /** Deletes the schedule; runs it started go on. */
  delete(id: string): Promise<void> {
    return typedErrors(() => this.schedule.getHandle(id).delete(), this.address);
  }
}
