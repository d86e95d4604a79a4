import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/common';
import { PIPELINE_WORKFLOW_TYPE } from '../../contracts/messages.js';

/**
 * Of these runs (workflow ids), the ones that are no longer running: a lease workflow takes back the keys a
 * terminated run held for its life, and grants a key for a run's life only to a run that runs. A run that continued
 * as new is running (its latest execution is). A workflow that is not a pipeline run (a lease workflow, anything a
 * namespace client started) counts as closed: no lease may live as long as it.
 */
export async function closedRuns(workflowIds: string[]): Promise<string[]> {
  const client = Context.current().client;
  const closed = await Promise.all(
    workflowIds.map(async (id) => {
      try {
        const { status, type } = await client.workflow.getHandle(id).describe();
        return status.name === 'RUNNING' && type === PIPELINE_WORKFLOW_TYPE ? undefined : id;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return id;
        throw err;
      }
    }),
  );
  return closed.filter((id): id is string => id !== undefined);
}
