import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { getStatusQuery, PIPELINE_WORKFLOW_TYPE, type PipelineRunInput } from '../../contracts/messages.js';
import type { RunRef, RunState } from '../../pipeline/run-state.js';
import { readRunStartInput } from '../run-start-input.js';
import { forkRefused } from './fork-refused.js';

/**
 * A fork's source as the worker reads it from Temporal: its state and its start input, never from the fork's input. The
 * run is the latest that bore the id (the one `status` shows); its folder and checkpoints are the ones its state names.
 */
export interface SourceRun extends RunRef {
  runId: string;
  state: RunState;
  input: PipelineRunInput;
}

/**
 * Reads run `runId`: its state from its status query (a closed run answers too, within the namespace's retention) and
 * its start input from its latest execution (a run that continued as new carries the same input).
 * @throws FORK_REFUSED when there is no such pipeline run
 */
export async function readSourceRun(client: Client, namespace: string | undefined, runId: string): Promise<SourceRun> {
  const handle = client.workflow.getHandle(runId);
  let description;
  try {
    description = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw forkRefused(`there is no run ${runId} to fork in namespace ${namespace}`, 'check the run id with `agent-pipeline list`; a run is gone once its namespace\'s retention has passed');
    throw err;
  }
  if (description.type !== PIPELINE_WORKFLOW_TYPE) throw forkRefused(`${runId} is a ${description.type} workflow, not a pipeline run`, 'fork a run that `agent-pipeline list` shows');
  const input = await readRunStartInput(client, namespace, { workflowId: runId, runId: description.runId });
  if (!input?.pipeline) throw forkRefused(`the history of run ${runId} holds no pipeline in its start input`, 'start the pipeline again instead');
  const state = await handle.query(getStatusQuery);
  return { runId, ...(state.firstExecutionRunId === undefined ? {} : { firstExecutionRunId: state.firstExecutionRunId }), state, input: input as PipelineRunInput };
}
