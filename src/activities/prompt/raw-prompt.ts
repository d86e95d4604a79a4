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
  const { stage, context } = parts;
  const append = stage.appendSystemPrompt
    ? renderTemplate(stage.appendSystemPrompt, context, `stage ${stage.id} appendSystemPrompt`, { 'stage.id': stage.id }, stage.templateSyntax)
    : undefined;
  const system = [parts.persona, append, stage.contract === 'none' ? undefined : OUTPUT_CONTRACT].filter((part): part is string => part !== undefined && part !== '').join('\n\n');
  return { system, user: parts.task };
}
