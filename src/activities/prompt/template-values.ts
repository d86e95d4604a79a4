import { Context, type Info } from '@temporalio/activity';
import { listTemplateVariables, type TemplateContext } from '../../pipeline/template.js';
import { templateValuesQuery } from '../../contracts/messages.js';
import type { WithheldValues } from '../../contracts/stage-attempt.js';
import { stageFailure } from '../failures.js';
import { storeUnavailableIn } from '../store-failure.js';

/** The ids of the stages that templates read as `{{stages.ID…}}` (outside `{{raw}}` spans). */
export function stagesReadBy(templates: readonly (string | undefined)[]): string[] {
  const ids = new Set<string>();
  for (const template of templates) {
    if (!template) continue;
    for (const name of listTemplateVariables(template)) {
      const [namespace, id] = name.split('.');
      if (namespace === 'stages' && id) ids.add(id);
    }
  }
  return [...ids];
}

/** Where an attempt reads withheld values from: the run it belongs to, and the stage that asks. */
export interface TemplateValuesSource {
  info: Info;
  stageId: string;
}

/**
 * The context with the values its templates use that the workflow left out of the activity input: the results of
 * `stageIds` not given already (when stages were left out) and all run inputs (when they were left out: every prompt
 * lists them). One query to the run, and none when nothing that is used was left out. A stage the run does not
 * answer for stays unknown, so rendering reports it exactly as before.
 * @throws INTERNAL_ERROR (retried) when the run cannot be asked
 */
export async function withWithheldValues(context: TemplateContext, withheld: WithheldValues | undefined, stageIds: readonly string[], source: TemplateValuesSource): Promise<TemplateContext> {
  if (!withheld) return context;
  const stages = withheld.stages ? stageIds.filter((id) => !Object.hasOwn(context.stages, id)) : [];
  if (stages.length === 0 && !withheld.inputs) return context;
  const execution = source.info.workflowExecution;
  try {
    if (!execution) throw new Error('the attempt belongs to no workflow run');
    const handle = Context.current().client.workflow.getHandle(execution.workflowId, execution.runId);
    const values = await handle.query(templateValuesQuery, { stage: source.stageId, stages, inputs: withheld.inputs });
    return { ...context, stages: { ...context.stages, ...values.stages }, inputs: values.inputs ?? context.inputs };
  } catch (err) {
    // A value claimed into the store (a large input) that cannot be read back: the store's problem, not a bug.
    const unavailable = storeUnavailableIn(err);
    throw stageFailure({
      type: unavailable ? 'STORE_UNAVAILABLE' : 'INTERNAL_ERROR',
      stageId: source.stageId,
      message: `reading the template values this stage uses from its run ${execution?.workflowId ?? ''} failed: ${(err as Error).message}`,
      cause: err as Error,
    });
  }
}
