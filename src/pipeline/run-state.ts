import type { StageResult } from './stage-result.js';

export type StageStatus = 'pending' | 'running' | 'completed' | 'failed' | 'skipped' | 'cancelled';
export type RunStatus = 'running' | 'completed' | 'failed' | 'cancelled';

/** One stage as the status query reports it. */
export interface StageState {
  id: string;
  status: StageStatus;
  backend: string;
  model: string;
  /** Attempts started so far, as far as the workflow knows (retries happen inside one activity). */
  startedAt?: number;
  finishedAt?: number;
  result?: StageResult;
  /** Why the stage failed, when it did. */
  error?: { type: string; message: string };
}

/** The whole run as the status query reports it, and as the workflow returns it. */
export interface RunState {
  runId: string;
  pipeline: string;
  status: RunStatus;
  inputs: Record<string, string>;
  stages: StageState[];
  costUsd: number;
  /** Absolute path of the run's workspace on the worker, once a stage has reported it. */
  workspace?: string;
  startedAt: number;
  finishedAt?: number;
}
