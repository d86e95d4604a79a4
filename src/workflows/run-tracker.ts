import type { ConditionContext } from '../pipeline/condition.js';
import type { ForkedFrom, RunRef, RunState, StageState, WaitingFor } from '../pipeline/run-state.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
import type { TemplateStage } from '../pipeline/template.js';

/** What one stage attempt (or one activity call with its retries) cost. */
export interface AttemptCost {
  usage?: TokenUsage;
  /** @unit US dollars */
  costUsd?: number | null;
  attempts: number;
  /** @unit milliseconds */
  durationMs: number;
}

/**
 * The run's state as the workflow changes it and queries read it. Deterministic: times come from the
 * workflow clock (`Date.now()` is replay-safe inside workflows).
 */
export class RunTracker {
  readonly state: RunState;
  /**
   * The stages by id: every activation looks stages up many times (readiness, marks, template values), and a search of
   * the list made each activation grow with the run. Holds the objects of `state.stages`, which are changed in place.
   */
  private byId = new Map<string, StageState>();
  /** Stages whose status changed since the scheduler last looked: only they and their dependents can become ready. */
  private changed = new Set<string>();
  /** Stages whose row in the report may show something new since it was last rendered (see run-report.ts). */
  private reportChanged = new Set<string>();

  /** `carried`: the state an earlier execution of the run handed over (continue-as-new); it is taken as it is. */
  constructor(runId: string, pipeline: string, inputs: Record<string, string>, stages: readonly ResolvedStage[], budgetUsd?: number, carried?: RunState) {
    this.state = carried ?? {
      runId,
      pipeline,
      status: 'running',
      inputs,
      stages: stages.map((s) => ({ id: s.id, status: 'pending', backend: s.backend, model: s.model, ...(s.isFinally ? { finally: true } : {}) })),
      costUsd: 0,
      budgetUsd,
      startedAt: Date.now(),
    };
  }

  /** Which run of its id this is, as the activities that touch its folder and checkpoints are told (run-folders.ts). */
  ref(): RunRef {
    const { runId, firstExecutionRunId } = this.state;
    return firstExecutionRunId === undefined ? { runId } : { runId, firstExecutionRunId };
  }

  stage(id: string): StageState {
    const stage = this.find(id);
    // Callers pass ids from the validated pipeline; an unknown id is a bug in the workflow, not user input.
    if (!stage) throw new TypeError(`unknown stage ${id}`);
    return stage;
  }

  /** A stage by id; the index is rebuilt when a stage was added to the list since (the run's delivery step). */
  private find(id: string): StageState | undefined {
    const known = this.byId.get(id);
    if (known || this.byId.size === this.state.stages.length) return known;
    this.byId = new Map(this.state.stages.map((s) => [s.id, s]));
    return this.byId.get(id);
  }

  hasStage = (id: string): boolean => this.find(id) !== undefined;
  isStarted = (id: string): boolean => this.stage(id).status !== 'pending';
  /** Whether dependents of `id` may run: it completed, or was skipped in a way that lets them run, or failed and they allow it. */
  isSatisfied = (id: string, allowFailure = false): boolean => {
    const stage = this.stage(id);
    return stage.status === 'completed' || (stage.status === 'skipped' && stage.skip?.dependentsRun === true) || (allowFailure && stage.status === 'failed');
  };

  /** The stages whose report rows may have changed since the last call. */
  takeReportChanged(): string[] {
    const ids = [...this.reportChanged];
    this.reportChanged.clear();
    return ids;
  }

  /** The stages whose status changed since the last call (see {@link changed}). */
  takeChanged(): string[] {
    const ids = [...this.changed];
    this.changed.clear();
    return ids;
  }

  markRunning(id: string, round: number): void {
    this.reportChanged.add(id);
    this.changed.add(id);
    const stage = this.stage(id);
    // Kept from the first start only once there is a second: a fork from the stage plans from its first (fork-run.ts).
    if (stage.startedAt !== undefined && stage.firstStartedAt === undefined && stage.carriedCostUsd === undefined) stage.firstStartedAt = stage.startedAt;
    Object.assign(stage, { status: 'running', round, startedAt: Date.now(), finishedAt: undefined, error: undefined, skip: undefined, attempt: undefined });
    this.refreshStatus();
  }

  /** Adds an activity call's cost to the stage's totals and the run's cost. */
  recordCost(id: string, cost: AttemptCost): void {
    this.reportChanged.add(id);
    const stage = this.stage(id);
    const totals = (stage.totals ??= { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0, attempts: 0, durationMs: 0 });
    totals.inputTokens += cost.usage?.inputTokens ?? 0;
    totals.outputTokens += cost.usage?.outputTokens ?? 0;
    // Totals from before cache tokens were counted lack the fields: start them at 0.
    totals.cacheReadTokens = (totals.cacheReadTokens ?? 0) + (cost.usage?.cacheReadTokens ?? 0);
    totals.cacheWriteTokens = (totals.cacheWriteTokens ?? 0) + (cost.usage?.cacheWriteTokens ?? 0);
    totals.costUsd += cost.costUsd ?? 0;
    totals.attempts += cost.attempts;
    totals.durationMs += cost.durationMs;
    stage.attempt = (stage.attempt ?? 0) + cost.attempts;
    this.state.costUsd += cost.costUsd ?? 0;
  }

  /** Keeps the latest result (shown while the stage waits) without completing the stage. */
  recordResult(id: string, result: StageResult): void {
    this.stage(id).result = result;
    this.state.workspace ??= result.workspace;
  }

  markWaiting(id: string, waitingFor: WaitingFor): void {
    this.reportChanged.add(id);
    this.changed.add(id);
    Object.assign(this.stage(id), { status: 'waiting', waitingFor });
    this.refreshStatus();
  }

  /** A wait ended; the stage goes on (a later mark sets where it ends up). */
  markResumed(id: string): void {
    this.reportChanged.add(id);
    this.changed.add(id);
    const stage = this.stage(id);
    if (stage.status === 'waiting') stage.status = 'running';
    stage.waitingFor = undefined;
    this.refreshStatus();
  }

  /**
   * A fork's start: the source's stages it takes over are completed here, with their results; their cost is carried
   * (`carriedCostUsd`), not spent, so neither `costUsd` nor the budget counts it.
   */
  takeOver(forkedFrom: ForkedFrom, stages: readonly StageState[]): void {
    this.state.forkedFrom = forkedFrom;
    for (const source of stages) {
      const stage = this.stage(source.id);
      const carriedCostUsd = source.carriedCostUsd ?? source.totals?.costUsd ?? 0;
      Object.assign(stage, { status: 'completed', result: source.result, startedAt: source.startedAt, finishedAt: source.finishedAt, round: source.round, carriedCostUsd });
      this.state.carriedCostUsd = (this.state.carriedCostUsd ?? 0) + carriedCostUsd;
      this.changed.add(source.id);
      this.reportChanged.add(source.id);
    }
    this.refreshStatus();
  }

  markCompleted(id: string, result: StageResult | undefined): void {
    if (result) this.recordResult(id, result);
    this.end(id, { status: 'completed' });
  }

  markFailed(id: string, error: { type: string; message: string }): void {
    this.end(id, { status: 'failed', error });
  }

  markCancelled(id: string, error: { type: string; message: string }): void {
    this.end(id, { status: 'cancelled', error });
  }

  markSkipped(id: string, reason: string, dependentsRun: boolean): void {
    this.end(id, { status: 'skipped', skip: { reason, dependentsRun } });
  }

  /** A rework sends a completed stage back to pending for the next round; its last result stays visible. */
  markPendingAgain(id: string): void {
    this.reportChanged.add(id);
    this.changed.add(id);
    Object.assign(this.stage(id), { status: 'pending', finishedAt: undefined, waitingFor: undefined });
  }

  private end(id: string, fields: Partial<StageState>): void {
    this.reportChanged.add(id);
    this.changed.add(id);
    Object.assign(this.stage(id), { waitingFor: undefined, finishedAt: Date.now(), ...fields });
    this.refreshStatus();
  }

  /** Stages that never started because the run ended first; `finally` stages only when `includeFinally`. */
  skipPending(reason: string, includeFinally = false): void {
    for (const stage of this.state.stages) {
      if (stage.status === 'pending' && (includeFinally || !stage.finally)) this.markSkipped(stage.id, reason, false);
    }
  }

  warn(message: string): void {
    (this.state.warnings ??= []).push(message);
  }

  finish(status: 'completed' | 'failed' | 'timed_out' | 'cancelled', error?: { type: string; message: string }): RunState {
    Object.assign(this.state, { status, finishedAt: Date.now(), error });
    return this.state;
  }

  /**
   * `blocked` while a stage waits for the answer to its agent's question, else `waiting` while any stage waits for
   * a person, so `list --status blocked|waiting` finds runs that need someone.
   */
  private refreshStatus(): void {
    if (this.state.finishedAt !== undefined) return;
    const waiting = this.state.stages.filter((s) => s.status === 'waiting');
    this.state.status = waiting.some((s) => s.waitingFor?.kind === 'answer') ? 'blocked' : waiting.length > 0 ? 'waiting' : 'running';
  }

  /** Stages an activity runs for or that wait for a person. */
  currentStageIds(): string[] {
    return this.state.stages.filter((s) => s.status === 'running' || s.status === 'waiting').map((s) => s.id);
  }

  /**
   * What earlier stages produced, as step templates see it: completed stages, and failed ones (read through
   * `needs: [{stage, allowFailure}]` and by `finally` stages) with `status` and `error`. With `ended` (for `finally`
   * stages, which cannot have `needs`), cancelled and skipped stages too.
   */
  templateStages(ended = false, only?: readonly string[]): Record<string, TemplateStage> {
    const wanted = only ? new Set(only) : undefined;
    const stages: Record<string, TemplateStage> = {};
    for (const s of this.state.stages) {
      if (wanted && !wanted.has(s.id)) continue;
      const stage = templateStageOf(s, ended);
      if (stage) stages[s.id] = stage;
    }
    return stages;
  }

  /** How many stages {@link templateStages} would list, without building their values (a stage's input needs only the count). */
  templateStageCount(ended = false): number {
    return this.state.stages.filter((s) => hasTemplateValues(s, ended)).length;
  }

  /** What `when:` conditions see: every finished stage's status, and the outputs (and report fields) of completed ones. */
  conditionContext(): ConditionContext {
    const stages: ConditionContext['stages'] = {};
    for (const s of this.state.stages) {
      if (s.status === 'pending' || s.status === 'running' || s.status === 'waiting') continue;
      const report = s.result?.report ? { report: s.result.report } : {};
      stages[s.id] = s.status === 'completed' && s.result ? { status: s.status, summary: s.result.summary, outputs: s.result.outputs, ...report } : { status: s.status };
    }
    return { inputs: this.state.inputs, stages };
  }
}

/** Whether a stage has values templates can read: see {@link RunTracker.templateStages}. */
function hasTemplateValues(s: StageState, ended: boolean): boolean {
  return (s.status === 'completed' && s.result !== undefined) || s.status === 'failed' || (ended && (s.status === 'cancelled' || s.status === 'skipped') && !s.finally);
}

/** One stage as templates see it, or undefined when it has nothing for them yet. */
function templateStageOf(s: StageState, ended: boolean): TemplateStage | undefined {
  if (!hasTemplateValues(s, ended)) return undefined;
  if (s.status === 'completed' && s.result) {
    return { summary: s.result.summary, outputs: s.result.outputs, artifacts: s.result.artifacts.map((a) => a.path), status: 'completed', error: '', ...answerAndReport(s.result) };
  }
  if (s.status === 'failed') {
    const error = s.error?.message ?? '';
    return { summary: s.result?.summary ?? error, outputs: s.result?.outputs ?? {}, artifacts: s.result?.artifacts.map((a) => a.path) ?? [], status: 'failed', error, ...answerAndReport(s.result) };
  }
  // Once the run has ended (for `finally` stages), a stage that never reported still has its status, and empty values.
  return { summary: '', outputs: {}, artifacts: [], status: s.status, error: s.error?.message ?? '' };
}

/** `{{stages.ID.answer}}` and `{{stages.ID.report.FIELD}}`, when the result has them (results recorded before answers were kept have neither). */
function answerAndReport(result: StageState['result']): Pick<TemplateStage, 'answer' | 'report'> {
  if (!result) return {};
  return { ...(result.answer === undefined ? {} : { answer: result.answer }), ...(result.report === undefined ? {} : { report: result.report }) };
}
