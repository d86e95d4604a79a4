import { allHandlersFinished, ApplicationFailure, CancellationScope, condition, setHandler, workflowInfo } from '@temporalio/workflow';
import { findRunInputProblems, formatRunInputProblems } from '../pipeline/run-input.js';
import type { RunState } from '../pipeline/run-state.js';
import {
  answerStageUpdate,
  approveStageUpdate,
  getStatusQuery,
  rejectStageUpdate,
  retryStageUpdate,
  skipStageUpdate,
  type PipelineRunInput,
} from './messages.js';
import { PipelineRun } from './pipeline-run.js';
import { RunControls } from './run-controls.js';

/**
 * Runs a pipeline: each stage round is one activity, started as soon as what it needs is satisfied. People
 * move waiting stages on with updates (answer, approve, reject, retry, skip); `getStatus` reads the run.
 */
export async function pipelineWorkflow(input: PipelineRunInput): Promise<RunState> {
  // Any client can start this workflow: a bad input fails the run at once, naming every problem. Thrown from the
  // workflow function (not the task), an ApplicationFailure fails the run instead of retrying its task forever.
  const problems = findRunInputProblems(input);
  if (problems.length > 0) {
    throw ApplicationFailure.create({ type: 'PIPELINE_INVALID', message: formatRunInputProblems(problems), nonRetryable: true, details: [{ problems }] });
  }
  const run = new PipelineRun(input, workflowInfo().workflowId);
  const controls = new RunControls(run);
  // Every handler is registered before the first await: an update that arrives with the first task must find its handler.
  setHandler(getStatusQuery, () => run.tracker.state);
  setHandler(answerStageUpdate, (i) => controls.answer(i), { validator: (i) => controls.validateAnswer(i) });
  setHandler(approveStageUpdate, (i) => controls.approve(i), { validator: (i) => controls.validateApprove(i) });
  setHandler(rejectStageUpdate, (i) => controls.reject(i), { validator: (i) => controls.validateReject(i) });
  setHandler(retryStageUpdate, (i) => controls.retry(i), { validator: (i) => controls.validateRetry(i) });
  setHandler(skipStageUpdate, (i) => controls.skip(i), { validator: (i) => controls.validateSkip(i) });
  try {
    return await run.run();
  } finally {
    // Let decisions in flight return their answer before the run closes; not cancellable, so a cancelled run waits too.
    await CancellationScope.nonCancellable(() => condition(allHandlersFinished));
  }
}
