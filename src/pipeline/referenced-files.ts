import { promptCandidates } from './prompt-names.js';
import type { PipelineDefinition } from './schema.js';
import type { StageDefinition } from './stage-schema.js';

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
  /**
   * The run goes on without it: a context entry marked `optional`, or one of the several files a bare prompt
   * name may stand for (the worker takes the first that exists).
   */
  optional?: boolean;
}

/** Every file the pipeline definition names directly, in file order. Workspace `inputs` are not files of the pipeline. */
export function listReferencedFiles(pipeline: PipelineDefinition): FileReference[] {
  const files: FileReference[] = [];
  if (pipeline.systemPrompt) files.push({ field: 'systemPrompt', path: pipeline.systemPrompt, kind: 'system prompt file' });
  (pipeline.context ?? []).forEach((entry, i) => {
    // Read from the run's workspace when a stage starts (`from: workspace`), never from the pipeline's folder.
    if (typeof entry === 'object' && entry.from === 'workspace') return;
    const { path, optional } = typeof entry === 'string' ? { path: entry, optional: false } : entry;
    files.push({ field: `context[${i}]`, path, kind: 'context file', ...(optional ? { optional } : {}) });
  });
  const listStage = (stage: StageDefinition, field: string): void => {
    if (stage.agent) files.push({ field: `${field}.agent`, path: stage.agent, kind: 'agent file' });
    if (!stage.prompt) return;
    const candidates = promptCandidates(stage.prompt, pipeline.promptsDir);
    for (const candidate of candidates) {
      files.push({ field: `${field}.prompt`, path: candidate, kind: 'step file', ...(candidates.length > 1 ? { optional: true } : {}) });
    }
  };
  pipeline.stages.forEach((stage, i) => listStage(stage, `stages[${i}]`));
  (pipeline.finally ?? []).forEach((stage, i) => listStage(stage, `finally[${i}]`));
  return files;
}

/** The `references` of an agent file's frontmatter, relative to the agent file. */
export function listAgentReferences(agentField: string, references: readonly string[] | undefined): { field: string; path: string }[] {
  return (references ?? []).map((reference, i) => ({ field: `${agentField} → references[${i}]`, path: reference }));
}
