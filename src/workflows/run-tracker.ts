import type { RunState, StageState } from '../pipeline/run-state.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult } from '../pipeline/stage-result.js';
import type { TemplateStage } from '../pipeline/template.js';
import { formatDuration } from '../pipeline/duration.js';

/**
 * The run's state as the workflow changes it and queries read it. Deterministic: times come from the
 * workflow clock (`Date.now()` is replay-safe inside workflows).
 */
export class RunTracker {
  readonly state: RunState;

  constructor(runId: string, pipeline: string, inputs: Record<string, string>, stages: readonly ResolvedStage[]) {
    this.state = {
      runId,
      pipeline,
      status: 'running',
      inputs,
      stages: stages.map((s) => ({ id: s.id, status: 'pending', backend: s.backend, model: s.model })),
      costUsd: 0,
      startedAt: Date.now(),
    };
  }

  stage(id: string): StageState {
    const stage = this.state.stages.find((s) => s.id === id);
    if (!stage) throw new Error(`unknown stage ${id}`);
    return stage;
  }

  isStarted = (id: string): boolean => this.stage(id).status !== 'pending';
  isCompleted = (id: string): boolean => this.stage(id).status === 'completed';

  markRunning(id: string): void {
    Object.assign(this.stage(id), { status: 'running', startedAt: Date.now() });
  }

  markCompleted(id: string, result: StageResult): void {
    Object.assign(this.stage(id), { status: 'completed', finishedAt: Date.now(), result });
    this.state.costUsd += result.costUsd ?? 0;
    this.state.workspace ??= result.workspace;
  }

  markFailed(id: string, error: { type: string; message: string }, cancelled: boolean): void {
    Object.assign(this.stage(id), { status: cancelled ? 'cancelled' : 'failed', finishedAt: Date.now(), error });
  }

  /** Stages that never started because the run ended first. */
  skipPending(): void {
    for (const stage of this.state.stages) if (stage.status === 'pending') stage.status = 'skipped';
  }

  finish(status: RunState['status']): RunState {
    this.state.status = status;
    this.state.finishedAt = Date.now();
    return this.state;
  }

  runningStageIds(): string[] {
    return this.state.stages.filter((s) => s.status === 'running').map((s) => s.id);
  }

  /** What earlier stages produced, as step templates see it. */
  templateStages(): Record<string, TemplateStage> {
    const stages: Record<string, TemplateStage> = {};
    for (const s of this.state.stages) {
      if (s.status === 'completed' && s.result) {
        stages[s.id] = { summary: s.result.summary, outputs: s.result.outputs, artifacts: s.result.artifacts.map((a) => a.path) };
      }
    }
    return stages;
  }

  /** A readable stage table for the Web UI's "current details" (markdown). */
  describe(): string {
    const rows = this.state.stages.map((s) => {
      const elapsed = s.startedAt ? formatDuration((s.finishedAt ?? Date.now()) - s.startedAt) : '';
      const cost = s.result?.costUsd != null ? `$${s.result.costUsd.toFixed(4)}` : '';
      return `| ${s.id} | ${s.status} | ${s.backend} · ${s.model} | ${elapsed} | ${cost} |`;
    });
    return [
      `**${this.state.pipeline}** — ${this.state.status}, cost so far $${this.state.costUsd.toFixed(4)}`,
      '',
      '| stage | state | backend | elapsed | cost |',
      '| --- | --- | --- | --- | --- |',
      ...rows,
    ].join('\n');
  }
}
