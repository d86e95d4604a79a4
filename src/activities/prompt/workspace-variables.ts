import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { readPipelineText } from './pipeline-file.js';
import { resolvePromptSource } from './prompt-source.js';

const WORKSPACE_VARIABLE = /\{\{\s*workspace\./;

/**
 * Whether a stage's templates use `{{workspace.…}}`: its inline prompt, its prompt file, its agent file or the
 * pipeline's system prompt. Files that cannot be read count as not using it; assembling the prompt reports them.
 */
export async function mentionsWorkspaceVariables(baseDir: string, stage: ResolvedStage, systemPromptFile?: string, promptsDir?: string): Promise<boolean> {
  const source = stage.prompt ? resolvePromptSource(baseDir, stage.prompt, promptsDir) : undefined;
  if (source?.kind === 'inline' && WORKSPACE_VARIABLE.test(stage.prompt)) return true;
  const files = [source?.kind === 'file' ? source.relative : undefined, stage.agent, systemPromptFile].filter((f): f is string => !!f);
  for (const file of files) {
    const text = await readPipelineText(baseDir, file).then((read) => read.text, () => '');
    if (WORKSPACE_VARIABLE.test(text)) return true;
  }
  return false;
}
