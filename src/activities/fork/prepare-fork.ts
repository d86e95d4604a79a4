import { activityInfo, Context } from '@temporalio/activity';
import type { PrepareForkInput } from '../../contracts/activities.js';
import type { PipelineRunInput } from '../../contracts/messages.js';
import type { ForkTakeOver, RunForkRequest } from '../../contracts/run-fork.js';
import { findSharedBranchProblem } from '../../pipeline/fork-branch.js';
import { describeRefusals, forkStart, planFork } from '../../pipeline/fork-plan.js';
import type { StageState } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import type { WorkerTrust } from '../../trust/worker-trust.js';
import { findForkSourceProblem } from '../check-trust.js';
import { keepHeartbeating } from '../checkpoint/keep-heartbeating.js';
import { CHECKPOINTS_VARIABLE } from '../checkpoint/settings.js';
import { findStageStartCheckpoint, missingForkPoint } from '../checkpoint/stage-start.js';
import { readRunStartInput } from '../run-start-input.js';
import type { AllowedPaths } from '../workspace/allowed-paths.js';
import { claimForkId, refuseOwnSource } from './fork-id.js';
import { forkRefused } from './fork-refused.js';
import { copyForkSessions } from './fork-sessions.js';
import { layOutForkWorkspace } from './fork-workspace.js';
import { readSourceRun, type SourceRun } from './source-run.js';

/** What the fork activity is built from. */
export interface PrepareForkDependencies {
  workspacesRoot: string;
  allowedPaths: AllowedPaths;
  trust: WorkerTrust;
  /** Where the source's checkpoints are: the worker's checkpoint store. Absent: checkpoints are off, no fork can start. */
  store?: ObjectStore;
}

/**
 * The `prepareFork` activity (docs/forking.md): reads the fork's own start input and its source run from Temporal (never
 * the values of the fork's input), plans the fork, lays out its workspace and copies the sessions of what it takes over.
 * @throws FORK_REFUSED naming the stage and field (or what is missing) and what to do
 */
export function createPrepareFork(deps: PrepareForkDependencies) {
  return async (input: PrepareForkInput): Promise<ForkTakeOver> => {
    const { client } = Context.current();
    const info = activityInfo();
    const execution = info.workflowExecution!;
    const own = (await readRunStartInput(client, info.workflowNamespace, execution)) as PipelineRunInput | undefined;
    // The request signed with the fork's input, not the copy the workflow passed on.
    const fork = own?.fork;
    if (!own || !fork) throw forkRefused(`run ${execution.workflowId} is not a fork: its start input names no source run`, 'start it with `agent-pipeline fork`');
    refuseOwnSource(execution.workflowId, fork.runId);
    const source = await readSourceRun(client, info.workflowNamespace, fork.runId);
    const from = checkSource(deps, source, { runId: execution.workflowId, input: own }, fork);
    if (!deps.store) throw forkRefused(`this worker keeps no checkpoints (${CHECKPOINTS_VARIABLE}=off), so it cannot start a fork from one`, `run the fork on a worker without ${CHECKPOINTS_VARIABLE}=off`);
    const store = deps.store;
    const manifest = await findStageStartCheckpoint(store, source, from);
    if (!manifest) {
      const missing = missingForkPoint(source.runId, from, store);
      throw forkRefused(missing.message, missing.fix);
    }
    const plan = planFork(sourceSide(source), own, from, Date.parse(manifest.takenAt), fork.force);
    const refusal = describeRefusals(source.runId, plan.refused);
    if (refusal) throw forkRefused(refusal.message, refusal.fix, { refused: plan.refused });
    const taken = source.state.stages.filter((s) => plan.takenOver.includes(s.id));
    // Before anything is laid out or copied under the fork's id: no other run's folder or objects may bear it.
    // The fork's own folder and checkpoints are named as its workflow named them (its first execution's run id).
    const self = { runId: execution.workflowId, ...(input.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: input.firstExecutionRunId }) };
    await claimForkId({ ...self, execution: execution.runId, sourceRunId: source.runId, workspacesRoot: deps.workspacesRoot }, store);
    const place = { ...self, input: own, workspacesRoot: deps.workspacesRoot, allowedPaths: deps.allowedPaths };
    const workspace = await keepHeartbeating(() => undefined, () => layOutForkWorkspace(store, source, manifest, place));
    const sessions = taken.flatMap((s): [string, string][] => (s.result?.sessionId ? [[s.id, s.result.sessionId]] : []));
    // From this host's copy of the source, else from its checkpoints in the store (its host may be gone).
    const copied = await keepHeartbeating(() => undefined, () => copyForkSessions(deps.workspacesRoot, source, workspace, sessions, store));
    const sourceExecution = source.firstExecutionRunId === undefined ? {} : { sourceFirstExecutionRunId: source.firstExecutionRunId };
    return { from, ...sourceExecution, stages: taken.map(takenOverState), sessions: copied.copied, warnings: copied.warnings };
  };
}

/**
 * The stage to fork from, once the source may be forked at all.
 * @throws FORK_REFUSED when it may not: untrusted, files read from the worker, a lent folder, an unknown stage (forkStart),
 * or a branch template that gives the fork the source's own branch
 */
function checkSource(deps: PrepareForkDependencies, source: SourceRun, own: { runId: string; input: PipelineRunInput }, fork: RunForkRequest): string {
  const trustProblem = findForkSourceProblem(deps.trust, source.input, source.runId);
  if (trustProblem) throw forkRefused(trustProblem, 'fork a run this worker trusts');
  const start = forkStart(source.runId, sourceSide(source), own.input, fork.stage);
  if (!('from' in start)) throw forkRefused(start.message, start.fix);
  const shared = findSharedBranchProblem({ ...source.input, runId: source.runId }, { ...own.input, runId: own.runId });
  if (shared) throw forkRefused(shared.message, shared.fix);
  return start.from;
}

/** The source as the fork plan reads it: a run input is a fork side (its pipeline, bundle and inputs) as it is. */
function sourceSide(source: SourceRun) {
  return { side: source.input, stages: source.state.stages, forkedFrom: source.state.forkedFrom };
}

/** What the fork keeps of a stage it takes over: its result and times, and its cost (carried, again for a fork's fork). */
function takenOverState(stage: StageState): StageState {
  const { id, status, backend, model, round, startedAt, finishedAt, result, totals, carriedCostUsd } = stage;
  return { id, status, backend, model, round, startedAt, finishedAt, result, carriedCostUsd: carriedCostUsd ?? totals?.costUsd ?? 0 };
}
