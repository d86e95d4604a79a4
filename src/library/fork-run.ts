import type { Client } from '@temporalio/client';
import type { RunForkRequest } from '../contracts/run-fork.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { InvalidRequestError } from '../errors.js';
import { planFork, rerunFrom, type ForkPlan } from '../pipeline/fork-plan.js';
import type { RunState } from '../pipeline/run-state.js';
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
  const snapshot = await readRun(client, runId);
  const page = await client.workflowService.getWorkflowExecutionHistory({ namespace: client.options.namespace, execution: { workflowId: runId, runId: snapshot.execution?.runId }, maximumPageSize: 1 });
  const first = page.history?.events?.[0];
  const event = first && (await decodeHistoryEvent(clientCodecs(client), first));
  const input = decodeFirst<PipelineRunInput>(event?.workflowExecutionStartedEventAttributes?.input);
  if (!input?.pipeline) throw refused(`the history of run ${runId} holds no pipeline in its start input`, 'start the pipeline again instead');
  return { state: snapshot.state, input };
}

/**
 * The plan of a fork of `source` from `request.stage` (a rerun's stage when absent) into `target`.
 * @throws InvalidRequestError FORK_REFUSED when the stage is unknown or never started, or a lent folder
 */
export function previewFork(runId: string, source: ForkSource, target: PipelineRunInput, request: Omit<RunForkRequest, 'runId'>): ForkPreview {
  if (source.input.pipeline.workspace?.dir !== undefined) throw refused(`run ${runId} worked in a lent folder (workspace.dir), which it changed in place: there is no earlier state of it to start from`, 'start the pipeline again');
  if (!source.input.bundle || !target.bundle) throw refused('a fork compares the pipeline files by their hashes, and a run started with --files-from-worker carries none', 'fork without --files-from-worker, from a run started without it');
  const from = request.stage ?? rerunFrom(source.state.stages);
  if (from === undefined) throw refused(`run ${runId} has no stage to run again: every stage completed, or none of the others ever started`, 'fork it with --from STAGE');
  for (const [side, input] of [[`run ${runId}`, source.input], ['the pipeline', target]] as const) {
    const ids = input.pipeline.stages.map((s) => s.id);
    if (!ids.includes(from)) throw refused(`${side} has no stage ${from} (--from)`, `name one of its stages: ${ids.join(', ')}`);
  }
  const startedAt = source.state.stages.find((s) => s.id === from)?.startedAt;
  if (startedAt === undefined) throw refused(`stage ${from} of run ${runId} never started, so there is no workspace of its start to fork from`, 'fork from a stage that started');
  const plan = planFork({ side: { pipeline: source.input.pipeline, bundle: source.input.bundle, inputs: source.input.inputs }, stages: source.state.stages }, { pipeline: target.pipeline, bundle: target.bundle, inputs: target.inputs }, from, startedAt, request.force);
  return { source: runId, from, ...plan };
}

/** @throws InvalidRequestError FORK_REFUSED listing the refusals of `preview`, when it has any */
export function refuseChanges(preview: ForkPreview): void {
  if (preview.refused.length === 0) return;
  const list = preview.refused.map((r) => `${r.field} (${r.reason})`).join(', ');
  const forceable = preview.refused.some((r) => !r.field.includes('.inputs.'));
  throw refused(`a stage the fork would take over from run ${preview.source} changed: ${list}`, forceable ? 'fork from an earlier stage, undo the change, or fork with --force to take them over as they completed' : 'fork from an earlier stage, or give the inputs the values the source run had');
}

function refused(message: string, fix: string): InvalidRequestError {
  return new InvalidRequestError('FORK_REFUSED', `[FORK_REFUSED] ${message}; ${fix}`);
}
