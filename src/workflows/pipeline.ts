import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  makeContinueAsNewFunc,
  patched,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { formatRunInputProblems } from '../pipeline/run-input-problems.js';
import type { RunState } from '../pipeline/run-state.js';
import {
  agentPromptUpdate,
  answerStageUpdate,
  denyStageUpdate,
  approveStageUpdate,
  getStatusQuery,
  rejectStageUpdate,
  retryStageUpdate,
  skipStageUpdate,
  templateValuesQuery,
  type PipelineRunInput,
} from '../contracts/messages.js';
import { leaseWaitSignal } from '../contracts/lease-wait.js';
import { PipelineRun } from './pipeline-run.js';
import { RUN_STARTED_AT_MEMO_KEY, type RunCarryOver } from '../contracts/run-carry-over.js';
import { RunControls } from './run-controls.js';
import { checkRunTrusted, SIGNED_RUNS_PATCH } from './run-trust.js';

/**
 * Runs started before the input check became a local activity checked their input in the workflow, at their first
 * task; replaying them needs no second check.
 */
const INPUT_CHECK_PATCH = 'input-check-local-activity';

const { checkRunInput } = proxyLocalActivities<PipelineActivities>({
  // Pure and quick; the timeout only bounds a worker that is stuck.
  startToCloseTimeout: '1m',
  // A check that throws is a bug, not bad luck: the run fails with it instead of retrying for ever.
  retry: { maximumAttempts: 3 },
});

/**
 * Runs a pipeline: each stage round is one activity, started as soon as what it needs is satisfied. People
 * move waiting stages on with updates (answer, approve, reject, retry, skip); `getStatus` reads the run.
 */
export async function pipelineWorkflow(input: PipelineRunInput): Promise<RunState> {
  // Built before the input is checked, so that every handler is registered in the first activation (an update that
  // arrives with the first task must find its handler). A bad input may make it throw; the check then names why.
  let run: PipelineRun | undefined;
  let buildError: unknown;
  try {
    run = new PipelineRun(input, workflowInfo().workflowId);
  } catch (err) {
    buildError = err;
  }
  if (run) registerHandlers(run);
  // Any client can start this workflow: a bad input fails the run at once, naming every problem. Thrown from the
  // workflow function (not the task), an ApplicationFailure fails the run instead of retrying its task forever.
  // A run that continued as new was checked by its first execution; only the run itself sets `carryOver` (a client
  // that sends it on a fresh start fails the check: the input schema does not know the field).
  const continued = input.carryOver !== undefined && workflowInfo().continuedFromExecutionRunId !== undefined;
  // Who may start runs comes first: a run the worker does not trust is refused before anything of it is looked at.
  // Once per run: a continued run carries the verdict (RunCarryOver.trust), its start signature may have expired since.
  // Both patches are asked before the first local activity is awaited: a patch marker recorded after a local
  // activity's marker in the same workflow task does not replay (the SDK's core reports nondeterminism).
  const checksTrust = !continued && patched(SIGNED_RUNS_PATCH);
  const checksInput = !continued && patched(INPUT_CHECK_PATCH);
  if (checksTrust) {
    const verdict = await checkRunTrusted(input, (error) => run?.tracker.finish('failed', error));
    run?.trust.accept(verdict);
  }
  if (checksInput) {
    const problems = await checkRunInput(input);
    if (problems.length > 0) {
      throw ApplicationFailure.create({ type: 'PIPELINE_INVALID', message: formatRunInputProblems(problems), nonRetryable: true, details: [{ problems }] });
    }
  }
  if (!run) throw buildError;
  // A fork takes over its source's stages once, before any stage; its later executions carry them.
  if (input.fork && !continued) await run.takeOverFork(input.fork);
  let outcome: Awaited<ReturnType<PipelineRun['run']>>;
  try {
    outcome = await run.run();
  } finally {
    // Let decisions in flight return their answer before the run closes; not cancellable, so a cancelled run waits too.
    await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
  }
  if (!('handOver' in outcome)) return outcome;
  return await continueRun(input, outcome.handOver);
}

/**
 * Continues the run as new: same workflow id, a fresh history, the same input (the bundle included: the activities
 * read it from the start event of the execution they belong to) plus the carried state. The memo (the bundle's
 * summary) and the search attributes (pipeline, stages, cost, status) are handed on as they are now, so the Web UI
 * and `list` show the run the same. With Worker Deployment Versioning, a pinned run's next execution stays on its
 * version (Temporal's default for continue-as-new without `initialVersioningBehavior`).
 */
function continueRun(input: PipelineRunInput, carryOver: RunCarryOver): Promise<never> {
  const info = workflowInfo();
  const memo = { ...info.memo, [RUN_STARTED_AT_MEMO_KEY]: carryOver.state.startedAt };
  return makeContinueAsNewFunc<typeof pipelineWorkflow>({ memo, typedSearchAttributes: info.typedSearchAttributes })({ ...input, carryOver });
}

function registerHandlers(run: PipelineRun): void {
  const controls = new RunControls(run);
  setHandler(getStatusQuery, () => run.tracker.state);
  setHandler(templateValuesQuery, (request) => run.templateValues(request));
  setHandler(answerStageUpdate, (i) => controls.answer(i), { validator: (i) => controls.validateAnswer(i) });
  setHandler(approveStageUpdate, (i) => controls.approve(i), { validator: (i) => controls.validateApprove(i) });
  setHandler(rejectStageUpdate, (i) => controls.reject(i), { validator: (i) => controls.validateReject(i) });
  setHandler(retryStageUpdate, (i) => controls.retry(i), { validator: (i) => controls.validateRetry(i) });
  setHandler(skipStageUpdate, (i) => controls.skip(i), { validator: (i) => controls.validateSkip(i) });
  setHandler(leaseWaitSignal, (report) => run.keys.onWaitSignal(report));
  setHandler(denyStageUpdate, (i) => controls.deny(i), { validator: (i) => controls.validateDeny(i) });
  setHandler(agentPromptUpdate, (i) => run.prompts.ask(i), { validator: (i) => run.prompts.validate(i) });
}
