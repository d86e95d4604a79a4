import { DELIVERY_STAGE_ID } from '../pipeline/delivery-stage.js';
import { findAncestors } from '../pipeline/graph.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { TemplateStage } from '../pipeline/template.js';
import type { TemplateValues, TemplateValuesRequest } from '../contracts/messages.js';
import type { WithheldValues } from '../contracts/stage-attempt.js';
import type { RunTracker } from './run-tracker.js';

/*
 * Template values by reference: a stage's activity input carries the results of the stages it needs directly and the
 * run's inputs when they are small; everything else its templates read, the activity asks the workflow for with
 * `templateValuesQuery`. So each activity input is O(its stage), and the history grows with the number of stages, not
 * with its square. Queries are not recorded in the history.
 */

/** The patch that sends template values by reference; runs recorded before it sent every value to every stage. */
export const TEMPLATE_VALUES_PATCH = 'template-values-by-reference';

/** Run inputs up to this size together (names and values) travel in every activity input. @unit characters */
export const INLINE_INPUTS_MAX_CHARS = 4_096;

/**
 * The results of the stages a stage needs travel in its activity input up to this size together; past it (a join after
 * a wide fan-out) the rest are read from the run, so no activity input nears Temporal's payload limit. @unit characters
 */
export const INLINE_STAGES_MAX_CHARS = 64_000;

/** The most warm start hints one activity input names; a wide fan-out would otherwise list every stage it starts. */
export const MAX_PREWARM_HINTS = 16;

/** What an activity input carries of the template values, and what it left for the activity to ask for. */
export interface InlineTemplateValues {
  inputs: Record<string, string>;
  priorStages: Record<string, TemplateStage>;
  /** Set when values were left out: the activity reads them with `templateValuesQuery` when its templates use them. */
  withheld?: WithheldValues;
}

/** The template values of the stages `ids` (those that have a result, up to a size), and the inputs when they are small. */
export function inlineTemplateValues(tracker: RunTracker, inputs: Record<string, string>, ids: readonly string[], ended = false): InlineTemplateValues {
  // Only the stages it needs are built: every attempt of a long run passes here, and the rest need only be counted.
  const needed = tracker.templateStages(ended, ids);
  const priorStages: Record<string, TemplateStage> = {};
  let size = 0;
  for (const id of ids) {
    if (!Object.hasOwn(needed, id)) continue;
    size += JSON.stringify(needed[id]).length;
    if (size > INLINE_STAGES_MAX_CHARS) break;
    priorStages[id] = needed[id];
  }
  const stagesWithheld = tracker.templateStageCount(ended) > Object.keys(priorStages).length;
  const inputsWithheld = inputsSize(inputs) > INLINE_INPUTS_MAX_CHARS;
  const withheld = { ...(stagesWithheld ? { stages: true } : {}), ...(inputsWithheld ? { inputs: true } : {}) };
  return { inputs: inputsWithheld ? {} : inputs, priorStages, ...(stagesWithheld || inputsWithheld ? { withheld } : {}) };
}

/**
 * Answers an activity's `templateValuesQuery`: the requested stages' values among those the requesting stage may read
 * (the stages it runs after; any stage for `finally` stages and the run's delivery), and the run's inputs if asked.
 * A stage it may not read is left out, so the activity reports it as unknown, as it would have before.
 */
export function answerTemplateValues(tracker: RunTracker, stages: readonly ResolvedStage[], request: TemplateValuesRequest): TemplateValues {
  const regular = stages.some((s) => s.id === request.stage);
  // A `finally` stage reads the run as it ended: a stage that never reported gives its status and empty values.
  const all = tracker.templateStages(!regular && request.stage !== DELIVERY_STAGE_ID, request.stages ?? []);
  const readable = regular ? findAncestors(stages, request.stage) : undefined;
  const found: Record<string, TemplateStage> = {};
  for (const id of request.stages ?? []) {
    if (Object.hasOwn(all, id) && (!readable || readable.has(id))) found[id] = all[id];
  }
  return { stages: found, ...(request.inputs ? { inputs: tracker.state.inputs } : {}) };
}

function inputsSize(inputs: Record<string, string>): number {
  let size = 0;
  for (const [name, value] of Object.entries(inputs)) size += name.length + value.length;
  return size;
}

/**
 * The warm start hints of `stage` worth their bytes in the history: the stages `ready` after it that may run on the
 * backend that starts agents ahead of time (the CLI's, or any with an agent file, which may choose it), at most
 * {@link MAX_PREWARM_HINTS}. When none may, one still tells a CLI stage that stages follow (its backend may then leave
 * the agent's shutdown to the background).
 */
export function prewarmHints(stage: ResolvedStage, ready: ResolvedStage[] | undefined): ResolvedStage[] | undefined {
  const mayUseCli = (s: ResolvedStage): boolean => s.backend === 'claude-cli' || s.agent !== undefined;
  const hints = ready?.filter(mayUseCli);
  return hints?.length === 0 && mayUseCli(stage) ? ready?.slice(0, 1) : hints?.slice(0, MAX_PREWARM_HINTS);
}
