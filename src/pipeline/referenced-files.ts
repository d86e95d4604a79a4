import type { PipelineDefinition } from './schema.js';

/**
 * The files a pipeline names, as one list, so that whatever carries a run's files (the run bundle the client
 * makes at `start`) and whatever checks them agree. A new file-referencing field is added here, once.
 * Pure: it reads nothing; files named inside other files (an agent's `references`) are listed by
 * {@link listAgentReferences} once the agent file has been read.
 */

/** One file reference: where it was written (for messages) and the path as written. */
export interface FileReference {
  /** The field that names the file, as a YAML path: `stages[2].agent`, `context[0]`, `systemPrompt`. */
  field: string;
  /** As written in the pipeline file; relative to the pipeline file's folder. */
  path: string;
  /** What the file is, for messages: `agent file`, `step file`, `context file`, `system prompt file`. */
  kind: 'agent file' | 'step file' | 'context file' | 'system prompt file';
}

/** A template given as a file path rather than inline text: one line, ending in a text extension. */
export function isTemplatePath(prompt: string): boolean {
  return !prompt.includes('\n') && /\.(md|txt|prompt)$/i.test(prompt.trim());
}

/** Every file the pipeline definition names directly, in file order. Workspace `inputs` are not files of the pipeline. */
export function listReferencedFiles(pipeline: PipelineDefinition): FileReference[] {
  const files: FileReference[] = [];
  if (pipeline.systemPrompt) files.push({ field: 'systemPrompt', path: pipeline.systemPrompt, kind: 'system prompt file' });
  (pipeline.context ?? []).forEach((file, i) => files.push({ field: `context[${i}]`, path: file, kind: 'context file' }));
  pipeline.stages.forEach((stage, i) => {
    if (stage.agent) files.push({ field: `stages[${i}].agent`, path: stage.agent, kind: 'agent file' });
    if (stage.prompt && isTemplatePath(stage.prompt)) files.push({ field: `stages[${i}].prompt`, path: stage.prompt, kind: 'step file' });
  });
  return files;
}

/** The `references` of an agent file's frontmatter, relative to the agent file. */
export function listAgentReferences(agentField: string, references: readonly string[] | undefined): { field: string; path: string }[] {
  return (references ?? []).map((reference, i) => ({ field: `${agentField} → references[${i}]`, path: reference }));
}
