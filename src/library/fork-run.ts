import type { Client } from '@temporalio/client';
import { listCheckpointEntries } from '../activities/checkpoint/keys.js';
import { findStageStartCheckpoint, missingForkPoint } from '../activities/checkpoint/stage-start.js';
import { WorkflowNotFoundError } from '@temporalio/common';
import type { RunForkRequest } from '../contracts/run-fork.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { InvalidRequestError, withCliMessage } from '../errors.js';
import { findSharedBranchProblem } from '../pipeline/fork-branch.js';
import { describeRefusals, forkStart, planFork, type ForkPlan, type ForkProblem } from '../pipeline/fork-plan.js';
import type { RunRef, RunState } from '../pipeline/run-state.js';
import { openWorkersStore, type ClientStoreSettings } from './client-store.js';
import { clientCodecs, decodeHistoryEvent } from './history-codec.js';
import { decodeFirst } from './run-history.js';
import { readRun } from './run-reader.js';

/*
 * The client's side of a fork (docs/forking.md): reads the source run, plans the fork the way the worker will, and
 * refuses at once what the worker would refuse. The worker decides again from the source run and its checkpoint, never
 * from what the client sends: this preview uses the time the stage last started as the source's state shows it.
 */

/** What a fork takes over, runs again and refuses, before it starts (`fork --dry-run`). */
export interface ForkPreview extends ForkPlan {
  source: string;
  from: string;
}

/** A fork's source as a client reads it: its state and start input. */
export interface ForkSource {
  state: RunState;
  input: PipelineRunInput;
}

/** Reads run `runId`'s state and start input. @throws InvalidRequestError NOT_A_PIPELINE_RUN, RunNotFoundError */
export async function readForkSource(client: Client, runId: string): Promise<ForkSource> {
  const snapshot = await readRun(client, runId).catch((err: unknown) => {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    const problem = { message: `there is no run ${runId} to fork in namespace ${client.options.namespace}` };
    const gone = "a run (and the checkpoints a fork starts from) is gone once the namespace's retention has passed after it ended";
    throw withCliMessage(refused({ ...problem, fix: `check the id with \`client.list()\`; ${gone}` }), refused({ ...problem, fix: `check the id with \`agent-pipeline list\`; ${gone}` }).message);
  });
  const page = await client.workflowService.getWorkflowExecutionHistory({ namespace: client.options.namespace, execution: { workflowId: runId, runId: snapshot.execution?.runId }, maximumPageSize: 1 });
  const first = page.history?.events?.[0];
  const event = first && (await decodeHistoryEvent(clientCodecs(client), first));
  const input = decodeFirst<PipelineRunInput>(event?.workflowExecutionStartedEventAttributes?.input);
  if (!input?.pipeline) throw refused({ message: `the history of run ${runId} holds no pipeline in its start input`, fix: 'start the pipeline again instead' });
  return { state: snapshot.state, input };
}

/**
 * The plan of a fork of `source` from `request.stage` (a rerun's stage when absent) into new run `target`, from the time
 * the stage first started, as the worker plans it from the stage's first-start checkpoint: a stage a review sent back
 * after that is not taken over, though it completed before the stage's last start. A run whose state predates
 * `firstStartedAt` gives its last start (its stages' first, unless reworked).
 * @throws InvalidRequestError FORK_REFUSED when the run cannot be forked so (forkStart), or would share the source's
 * branch
 */
export function previewFork(runId: string, source: ForkSource, target: { runId: string; input: PipelineRunInput }, request: Omit<RunForkRequest, 'runId'>): ForkPreview {
  // A run input is a fork side (its pipeline, bundle and inputs) as it is.
  const sourceSide = { side: source.input, stages: source.state.stages, forkedFrom: source.state.forkedFrom };
  const start = forkStart(runId, sourceSide, target.input, request.stage);
  if (!('from' in start)) throw refused(start);
  const shared = findSharedBranchProblem({ ...source.input, runId }, { ...target.input, runId: target.runId });
  if (shared) throw refused(shared);
  const stage = source.state.stages.find((s) => s.id === start.from)!;
  const startedAt = stage.firstStartedAt ?? stage.startedAt!;
  return { source: runId, from: start.from, ...planFork(sourceSide, target.input, start.from, startedAt, request.force) };
}

/**
 * Refuses at once a fork from a stage whose first-start checkpoint is not in the store this client reads (its
 * `AGENT_PIPELINE_STORE`, or the default store of a workspaces folder it sees), as the worker would. Only a store that
 * holds other checkpoints of the run answers: one this client cannot reach or read, or that holds none of the run's
 * (another store than the workers', or checkpoints off), leaves the decision to the worker.
 * @throws InvalidRequestError FORK_REFUSED naming the stage and the store
 */
export async function refuseMissingForkPoint(settings: ClientStoreSettings, source: RunRef, from: string): Promise<void> {
  let missing: ForkProblem | undefined;
  try {
    const store = openWorkersStore(settings);
    // Listed once: both whether the store holds the run at all, and where the stage's checkpoint is.
    const entries = store ? await listCheckpointEntries(store, source) : [];
    if (entries.length === 0) return;
    if (!(await findStageStartCheckpoint(store!, source, from, entries))) missing = missingForkPoint(source.runId, from, store!);
  } catch {
    return;
  }
  if (missing) throw refused(missing);
}

/** @throws InvalidRequestError FORK_REFUSED listing the refusals of `preview`, when it has any */
export function refuseChanges(preview: ForkPreview): void {
  const problem = describeRefusals(preview.source, preview.refused);
  if (problem) throw refused(problem);
}

function refused({ message, fix }: ForkProblem): InvalidRequestError {
  return new InvalidRequestError('FORK_REFUSED', `[FORK_REFUSED] ${message}; ${fix}`);
}
