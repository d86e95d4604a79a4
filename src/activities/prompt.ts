import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import { renderTemplate, TemplateError, type TemplateContext } from '../pipeline/template.js';
import { stageFailure } from './failures.js';

/** What a stage attempt sends to its backend. */
export interface StagePrompt {
  /** The persona and the output contract: `--append-system-prompt` for the CLI, `system` for the API. */
  system: string;
  /** The task: sent on stdin to the CLI, as the user message to the API. */
  user: string;
}

export interface PromptOptions {
  stage: ResolvedStage;
  baseDir: string;
  pipelineName: string;
  context: TemplateContext;
}

/** How every stage is told to finish; `readAgentOutput` parses exactly this. */
export const OUTPUT_CONTRACT = [
  'When you are done, end your answer with one fenced JSON block that reports the result:',
  '```json',
  '{"success": true, "summary": "one or two sentences on what you did", "outputs": {"key": "value"}}',
  '```',
  'Use "success": false and an "error" field if you could not do the task.',
  'If you cannot continue without a decision from a person, answer with a line `BLOCKED: <your question>` instead.',
].join('\n');

/** A template given as a file path rather than inline text: one line, ending in a text extension. */
function isTemplatePath(prompt: string): boolean {
  return !prompt.includes('\n') && /\.(md|txt|prompt)$/i.test(prompt.trim());
}

async function readStageFile(baseDir: string, relative: string, stageId: string, field: string): Promise<string> {
  const file = path.resolve(baseDir, relative);
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw stageFailure({
      type: 'FILE_NOT_FOUND',
      stageId,
      message: `cannot read ${field} file ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'}); paths in a pipeline file are relative to its folder`,
      details: { field, path: file },
    });
  }
}

/** Splits an agent definition into frontmatter and persona body. */
export function parseAgentFile(text: string): { frontmatter: Record<string, unknown>; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!match) return { frontmatter: {}, body: text.trim() };
  const frontmatter = parseDocument(match[1]).toJS() as unknown;
  return {
    frontmatter: frontmatter && typeof frontmatter === 'object' ? (frontmatter as Record<string, unknown>) : {},
    body: match[2].trim(),
  };
}

/** Builds the system and user prompt of one stage attempt. */
export async function assemblePrompt(options: PromptOptions): Promise<StagePrompt> {
  const { stage, baseDir, context } = options;
  const persona = stage.agent ? parseAgentFile(await readStageFile(baseDir, stage.agent, stage.id, 'agent')).body : '';
  const templateName = isTemplatePath(stage.prompt) ? path.resolve(baseDir, stage.prompt) : `stage ${stage.id} prompt (inline)`;
  const template = isTemplatePath(stage.prompt) ? await readStageFile(baseDir, stage.prompt, stage.id, 'prompt') : stage.prompt;

  let task: string;
  try {
    task = renderTemplate(template, context, templateName);
  } catch (err) {
    if (err instanceof TemplateError) {
      throw stageFailure({ type: 'TEMPLATE_VARIABLE_UNKNOWN', stageId: stage.id, message: err.message, details: { variables: err.variables } });
    }
    throw err;
  }

  const inputs = Object.entries(context.inputs);
  const earlier = Object.entries(context.stages);
  const user = [
    `Pipeline: ${options.pipelineName} · Stage: ${stage.id} · Run: ${context.run.id} · Attempt: ${context.attempt}`,
    '',
    '## Your task',
    task.trim(),
    ...(inputs.length ? ['', '## Run inputs', ...inputs.map(([k, v]) => `- ${k}: ${v}`)] : []),
    ...(earlier.length
      ? [
          '',
          '## Work from earlier stages (files are in your working directory)',
          ...earlier.map(
            ([id, s]) => `- ${id}: ${s.summary}${s.artifacts.length ? `\n  files: ${s.artifacts.join(', ')}` : ''}`,
          ),
        ]
      : []),
  ].join('\n');

  const system = [persona, OUTPUT_CONTRACT].filter(Boolean).join('\n\n');
  return { system, user };
}
