import type { Info } from '@temporalio/activity';
import type { RunRef } from '../../pipeline/run-state.js';
import type { StageResult } from '../../pipeline/stage-result.js';
import type { TemplateContext } from '../../pipeline/template.js';
import type { StageAttemptInput } from '../../contracts/stage-attempt.js';
import type { AttemptLog } from '../attempt/log.js';
import type { Spending } from '../attempt/spending.js';
import type { StageBackend } from '../backends/stage-backend.js';
import type { AllowedPaths, RunPlace } from '../workspace/allowed-paths.js';
import type { PipelineDirs } from '../prompt/worker-files.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';
import type { CheckpointOptions } from '../checkpoint/settings.js';
import type { ObjectStore } from '../../store/object-store.js';

/** What the stage attempt activity is built from (`createRunStage`). */
export interface RunStageDependencies {
  /** Folder under which each run gets its workspace. */
  workspacesRoot: string;
  /** The built-in backends and any the worker was given, by the name a stage's `backend:` selects. */
  backends: Record<string, StageBackend>;
  /** Host folders a run may name in `workspace.repo`, `workspace.dir` and `addDirs` besides the workspaces root. */
  allowedPaths: AllowedPaths;
  /** Host folders a run that carries no files may read its pipeline files from (`AGENT_PIPELINE_PIPELINE_DIRS`). */
  pipelineDirs: PipelineDirs;
  /** Where and how often runs are checkpointed; none: no checkpoint is taken or restored (`AGENT_PIPELINE_CHECKPOINTS=off`). */
  checkpoints?: CheckpointOptions;
  /** The workers' object store: where a cut answer is kept whole. @default none: it is kept in the run's bookkeeping */
  store?: ObjectStore;
}

/** One attempt as `runStage` prepared it: its workspace open, its log read. */
export interface AttemptSetup {
  deps: RunStageDependencies;
  input: StageAttemptInput;
  info: Info;
  /** Where agent, step and context files are read: the run's bundle, else `baseDir`. */
  filesDir: string;
  context: TemplateContext;
  workspace: RunWorkspace;
  log: AttemptLog;
  /** What the execution's earlier attempts spent, and the warnings they gave. */
  earlier: Spending;
  earlierWarnings: string[];
  /** The checkpoint this host's copy of the run was restored from before this attempt, if it was. */
  restoredFrom?: { id: string; takenAt: string };
  /** What the attempt last heartbeat (set as the backend reports progress), for what heartbeats after it. */
  lastHeartbeat?: unknown;
}

/** What the agent did, before its answer is read: the fields every stage result has. */
export type AttemptRecord = Omit<StageResult, 'status' | 'summary' | 'outputs'>;

/** Where a run lives, for `checkAllowedPath` (workspace/allowed-paths.ts). */
export function placeOf(deps: Pick<RunStageDependencies, 'workspacesRoot'>, input: RunRef & { baseDir: string }): RunPlace {
  return { workspacesRoot: deps.workspacesRoot, runId: input.runId, firstExecutionRunId: input.firstExecutionRunId, baseDir: input.baseDir };
}

/** The attempt's latest heartbeat details (its own, else the previous attempt's): what work that heartbeats sends. */
export function latestHeartbeat(setup: Pick<AttemptSetup, 'lastHeartbeat' | 'info'>): unknown {
  return setup.lastHeartbeat ?? setup.info.heartbeatDetails;
}
