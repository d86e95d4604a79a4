import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import type { StagePrompt } from './compose.js';
import { OUTPUT_CONTRACT } from './system-prompt.js';

/*
 * `promptFormat: raw`: a team that tuned its prompts sends them as written. The user message is the stage prompt,
 * its `{{…}}` filled and nothing else (not trimmed, no sections, no pipeline header); the system prompt is the agent
 * file and its references, then the stage's own `appendSystemPrompt`, then the output contract when the stage asks
 * for a report (`contract: json`): the one thing the worker needs to read the answer. With `contract: none` and no
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
}

/** Builds the raw prompt. @throws TemplateError when `appendSystemPrompt` uses an unknown variable */
export function composeRawPrompt(parts: RawPromptParts): StagePrompt {
  return { system: composeRawSystem(parts.stage, parts.persona, parts.context), user: parts.task };
}

/**
 * The raw system prompt: the persona, `appendSystemPrompt` (filled from `context`; as written without one, for an
 * agent started ahead of time), and the contract unless `contract: none`.
 * @throws TemplateError when `appendSystemPrompt` uses an unknown variable
 */
export function composeRawSystem(stage: ResolvedStage, persona: string | undefined, context?: TemplateContext): string {
  const append =
    stage.appendSystemPrompt && context
      ? renderTemplate(stage.appendSystemPrompt, context, `stage ${stage.id} appendSystemPrompt`, { 'stage.id': stage.id }, stage.templateSyntax)
      : stage.appendSystemPrompt;
  return [persona, append, stage.contract === 'none' ? undefined : OUTPUT_CONTRACT].filter((part): part is string => part !== undefined && part !== '').join('\n\n');
}
