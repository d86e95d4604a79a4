import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { listTemplateVariables, renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import type { StagePrompt } from './compose.js';
import { FREE_ANSWER_CONTRACT, OUTPUT_CONTRACT, OUTPUT_CONTRACT_VARIABLE, STAGE_PROMPT_VARIABLE, type SystemPromptTemplate } from './system-prompt.js';

/*
 * Prompts as written. `promptFormat: raw`: a team that tuned its prompts sends them as written. The user message is
 * the stage prompt, its `{{…}}` filled and nothing else (not trimmed, no sections, no pipeline header). A pipeline with
 * its own `systemPrompt:` (either format) gets exactly that text, filled, with the stage prompt as written in
 * `{{stage_prompt}}`. The system channel is the agent file and its references, then the stage's own
 * `appendSystemPrompt`, then the output contract when the stage asks for a report (`contract: json`) and the system
 * prompt does not place it: the one thing the worker needs to read the answer. With `contract: none` and no
 * `appendSystemPrompt`, the model receives exactly the agent file and the prompt. Pure.
 */

/** The parts of a raw prompt, already read from disk. */
export interface RawPromptParts {
  stage: ResolvedStage;
  context: TemplateContext;
  /** The rendered step template, exactly. */
  task: string;
  /** The agent file's body and references, exactly as `loadAgentFile` joined them. */
  persona?: string;
  /** The pipeline's `systemPrompt:` file, when it has one. */
  wrapper?: SystemPromptTemplate;
}

/** Builds the raw prompt. @throws TemplateError when the system prompt or `appendSystemPrompt` uses an unknown variable */
export function composeRawPrompt(parts: RawPromptParts): StagePrompt {
  const { stage, context, wrapper } = parts;
  // In the pipeline's own system prompt the placed contract is the one the stage has (`contract: none`: its own words).
  const contract = stage.contract === 'none' ? FREE_ANSWER_CONTRACT : OUTPUT_CONTRACT;
  const user = wrapper
    ? renderTemplate(wrapper.text, context, wrapper.name, { [STAGE_PROMPT_VARIABLE]: parts.task, [OUTPUT_CONTRACT_VARIABLE]: contract, 'stage.id': stage.id }, stage.templateSyntax)
    : parts.task;
  return { system: composeRawSystem(stage, parts.persona, context, wrapper), user };
}

/**
 * The raw system prompt: the persona, `appendSystemPrompt` (filled from `context`; as written without one, for an
 * agent started ahead of time), and the contract unless `contract: none` or the pipeline's system prompt places it.
 * @throws TemplateError when `appendSystemPrompt` uses an unknown variable
 */
export function composeRawSystem(stage: ResolvedStage, persona: string | undefined, context?: TemplateContext, wrapper?: SystemPromptTemplate): string {
  const append =
    stage.appendSystemPrompt && context
      ? renderTemplate(stage.appendSystemPrompt, context, `stage ${stage.id} appendSystemPrompt`, { 'stage.id': stage.id }, stage.templateSyntax)
      : stage.appendSystemPrompt;
  const placed = wrapper !== undefined && listTemplateVariables(wrapper.text).includes(OUTPUT_CONTRACT_VARIABLE);
  return [persona, append, stage.contract === 'none' || placed ? undefined : OUTPUT_CONTRACT].filter((part): part is string => part !== undefined && part !== '').join('\n\n');
}
