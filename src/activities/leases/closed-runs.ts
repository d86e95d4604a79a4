import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/common';

/**
 * Of these runs (workflow ids), the ones that are no longer running: a lease workflow takes back the keys a
 * terminated run held for its life. A run that continued as new is running (its latest execution is).
 */
export async function closedRuns(workflowIds: string[]): Promise<string[]> {
  const client = Context.current().client;
  const closed = await Promise.all(
    workflowIds.map(async (id) => {
      try {
        return (await client.workflow.getHandle(id).describe()).status.name === 'RUNNING' ? undefined : id;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return id;
        throw err;
      }
    }),
  );
  return closed.filter((id): id is string => id !== undefined);
}
