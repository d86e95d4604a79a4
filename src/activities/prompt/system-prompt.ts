import { listTemplateVariables } from '../../pipeline/template.js';
import { stageFailure } from '../failures.js';
import { readPipelineFile } from './pipeline-file.js';

/** The placeholder a system prompt must contain: where the stage's own prompt goes. */
export const STAGE_PROMPT_VARIABLE = 'stage_prompt';
/** Optional placeholder for the output contract; without it the contract is added to the system channel. */
export const OUTPUT_CONTRACT_VARIABLE = 'output_contract';

/** How every stage is told to finish; `readAgentOutput` parses exactly this. */
export const OUTPUT_CONTRACT = [
  'When you are done, end your answer with one fenced JSON block that reports the result:',
  '```json',
  '{"success": true, "summary": "one or two sentences on what you did", "outputs": {"key": "value"}}',
  '```',
  '"outputs" holds values later stages may use. Use "success": false and an "error" field if you could not do the task.',
  'A reviewer adds "verdict": "approve" or "rework", and "feedback": a list of concrete findings.',
  'If you cannot continue without a decision from a person, answer with a line `BLOCKED: <your question>` instead.',
].join('\n');

/** How a `contract: none` stage is told to finish: its answer is the deliverable, no report block. */
export const FREE_ANSWER_CONTRACT = [
  'Your answer is the deliverable: give it in full, with no report block. End with a short closing paragraph that sums up what you did.',
  'If you cannot continue without a decision from a person, answer with a line `BLOCKED: <your question>` instead.',
].join('\n');

/**
 * The built-in system prompt that wraps every stage. The first line is also how the scripted model
 * server's scenarios recognise a stage (`Stage: spec ·`): keep its shape.
 */
export const DEFAULT_SYSTEM_PROMPT = [
  'Pipeline: {{run.pipeline}} · Stage: {{stage.id}} · Run: {{run.id}} · Attempt: {{attempt}}',
  '',
  'You are one stage of an automated pipeline. Nobody answers questions while you work: decide what you',
  'reasonably can, and ask only when you cannot go on without a person.',
  '',
  '{{stage_prompt}}',
  '',
  '## How to finish',
  '{{output_contract}}',
].join('\n');

/** A loaded system prompt template and where it came from (for error messages). */
export interface SystemPromptTemplate {
  text: string;
  name: string;
}

/**
 * The pipeline's `systemPrompt:` file, or the built-in one.
 * @throws FILE_NOT_FOUND when the file is missing; CONFIG_INVALID when it lacks `{{stage_prompt}}`
 */
export async function loadSystemPrompt(baseDir: string, relative: string | undefined, stageId: string): Promise<SystemPromptTemplate> {
  if (!relative) return { text: DEFAULT_SYSTEM_PROMPT, name: 'the built-in system prompt' };
  const { file, text } = await readPipelineFile(baseDir, relative, stageId, 'systemPrompt', "the pipeline's system prompt file");
  if (!listTemplateVariables(text).includes(STAGE_PROMPT_VARIABLE)) {
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `the system prompt file ${file} has no {{${STAGE_PROMPT_VARIABLE}}} placeholder, so the stage's task would never reach the agent`,
      hint: `add a line {{${STAGE_PROMPT_VARIABLE}}} where the stage's prompt belongs (and {{${OUTPUT_CONTRACT_VARIABLE}}} where the output contract belongs)`,
      details: { path: file },
    });
  }
  return { text, name: file };
}
