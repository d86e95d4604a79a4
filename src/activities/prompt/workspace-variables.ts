import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { readPipelineText } from './pipeline-file.js';
import { resolvePromptSource } from './prompt-source.js';

const WORKSPACE_VARIABLE = /\{\{\s*workspace\./;

/**
 * The texts of a stage's prompt templates: its inline prompt or its prompt file, its agent file and the pipeline's
 * system prompt; for a command stage, its `env:` values. Files that cannot be read are left out; assembling the prompt
 * reports them.
 */
export async function readPromptTemplates(baseDir: string, stage: ResolvedStage, systemPromptFile?: string, promptsDir?: string): Promise<string[]> {
  const source = stage.prompt ? resolvePromptSource(baseDir, stage.prompt, promptsDir) : undefined;
  const texts = [...(source?.kind === 'inline' ? [stage.prompt] : []), ...Object.values(stage.env ?? {})];
  const files = [source?.kind === 'file' ? source.relative : undefined, stage.agent, systemPromptFile].filter((f): f is string => !!f);
  for (const file of files) texts.push(await readPipelineText(baseDir, file).then((read) => read.text, () => ''));
  return texts;
}

/** Whether prompt templates (see {@link readPromptTemplates}) use `{{workspace.…}}`. */
export function mentionsWorkspaceVariables(templates: readonly string[]): boolean {
  return templates.some((text) => WORKSPACE_VARIABLE.test(text));
}
