import path from 'node:path';
import { needIds } from '../../pipeline/graph.js';
import type { ContextFile } from '../../pipeline/schema.js';
import { contextText, readContextFiles } from './context-files.js';
import { composeRawPrompt } from './raw-prompt.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { CONTEXT_VARIABLE, FILES_VARIABLE, listTemplateVariables, renderTemplate, TemplateError, type TemplateContext, type TemplateStage } from '../../pipeline/template.js';
import { applyAgentDefaults, loadAgentFile, type AgentDefinition } from './agent-file.js';
import { stageFailure } from '../failures.js';
import { readFileExcerpt, type FileExcerpt } from './file-excerpt.js';
import { readPipelineFile } from './pipeline-file.js';
import { composePrompt, formatFile, type PromptFile, type PromptParts, type StagePrompt } from './compose.js';
import type { ReworkRound } from '../../contracts/stage-attempt.js';
import { missingPromptMessage, resolvePromptSource } from './prompt-source.js';
import { resolveStageInputs, type StageInputFile } from './stage-inputs.js';
import { loadSystemPrompt } from './system-prompt.js';
import { resolveInside } from '../../files/inside.js';
import { backendTraits } from '../backends/stage-backend.js';

export type { StagePrompt } from './compose.js';

/** Most of one file shown in a prompt. @unit bytes */
export const MAX_INLINE_FILE_BYTES = 100_000;
/** Most file content one prompt carries (context files, inputs, earlier artifacts together). @unit bytes */
export const MAX_INLINE_TOTAL_BYTES = 400_000;

export interface AssemblePromptOptions {
  /** The stage as the workflow resolved it; the agent file's frontmatter may still fill options. */
  stage: ResolvedStage;
  /** Folder of the pipeline file: agent, prompt, context and system prompt paths resolve against it. */
  baseDir: string;
  /** The run's workspace, where inputs and earlier artifacts are. */
  workspaceDir: string;
  /** Variables for templates; `context.stages` are the completed earlier stages. */
  context: TemplateContext;
  /** Pipeline `context:` files. */
  contextFiles?: ContextFile[];
  /** Pipeline `promptsDir:`, where a bare `prompt: name` is looked up. */
  promptsDir?: string;
  /** Pipeline `systemPrompt:` file. */
  systemPromptFile?: string;
  reworkHistory?: ReworkRound[];
  /** @unit US dollars */
  maxBudgetUsd?: number;
}

export interface AssembledPrompt {
  prompt: StagePrompt;
  /** The stage with the agent file's `model`, `tools` and `backend` applied. */
  stage: ResolvedStage;
  /** Missing references, files cut or left out for size. */
  warnings: string[];
}

/**
 * Builds the prompt of one stage attempt: reads the agent file, the step template, context files,
 * declared inputs and (for a backend that cannot read files, the API's) earlier stages' artifacts.
 * @throws FILE_NOT_FOUND, INPUT_NOT_FOUND, TEMPLATE_VARIABLE_UNKNOWN, CONFIG_INVALID
 */
export async function assemblePrompt(options: AssemblePromptOptions): Promise<AssembledPrompt> {
  const { baseDir, context } = options;
  const contextNotes: string[] = [];
  const files = new InlinedFiles(options.workspaceDir, backendTraits(options.stage.backend).inlinesFiles);
  // Read before the prompt is rendered: `{{context}}` places their text where the prompt wants it.
  const contextFiles = await readContextFiles(options.contextFiles ?? [], { pipelineDir: baseDir, workspaceDir: options.workspaceDir }, options.stage.id, { nextLimit: () => files.nextLimit, count: (e) => files.count(e) }, contextNotes);
  // Checked before the prompt is rendered, in every format: a missing input fails the stage, and `{{files}}` places them.
  const { found: inputs, missingOptional } = await resolveStageInputs(options.workspaceDir, options.stage.id, options.stage.inputs ?? [], context.stages);
  const { agent, stage, task } = await renderTask(options, { context: contextText(contextFiles), files: () => inputFilesText(inputs, files) });
  const warnings = [...(agent?.warnings ?? [])];
  if (stage.promptFormat === 'raw' || options.systemPromptFile) {
    // As written: the prompt (in the pipeline's own system prompt, when it has one), nothing added around it.
    const wrapper = options.systemPromptFile ? await loadSystemPrompt(baseDir, options.systemPromptFile, stage.id) : undefined;
    if (files.omitted > 0) warnings.push(omittedWarning(files.omitted));
    return { prompt: withTemplateErrors(stage.id, () => composeRawPrompt({ stage, context, task, persona: agent?.persona, wrapper })), stage, warnings };
  }
  const systemPrompt = await loadSystemPrompt(baseDir, options.systemPromptFile, stage.id);
  const notes = [...missingOptional.map((p) => `The optional input file ${p} does not exist in the workspace; work without it.`), ...contextNotes];
  const inline = backendTraits(stage.backend).inlinesFiles;
  // The agent file may have chosen another backend than the stage's: inline as the backend that runs needs.
  files.inline = inline;
  const projectContext: PromptFile[] = contextFiles.map((f) => ({ path: f.path, excerpt: f.excerpt }));
  const inputFiles: PromptFile[] = [];
  for (const input of inputs) {
    const description = input.writer ? `written by stage ${input.writer}` : undefined;
    inputFiles.push(input.isDirectory ? { path: `${input.path}/`, description } : await files.show(input.path, description));
  }
  const earlier = await showEarlierWork(context.stages, stage, inputs, files);
  if (files.omitted > 0) warnings.push(omittedWarning(files.omitted));
  const prompt = withTemplateErrors(stage.id, () =>
    composePrompt({
      stage,
      context,
      task,
      persona: agent?.persona,
      agentDescription: agent?.frontmatter.description,
      systemPrompt,
      projectContext,
      inputs: inputFiles,
      earlier,
      reworkHistory: options.reworkHistory,
      inline,
      maxBudgetUsd: options.maxBudgetUsd,
      notes,
    }),
  );
  return { prompt, stage, warnings };
}

const omittedWarning = (omitted: number): string => `the prompt left out the content of ${omitted} file(s) to stay under ${MAX_INLINE_TOTAL_BYTES} bytes of inlined files`;

/**
 * `{{files}}`: the stage's declared input files, each under a `### <path>` heading with its content in a fence, one
 * after the other; a folder is named only, a missing optional file is left out. Read with the same bounds as context
 * files (per file and per prompt).
 */
async function inputFilesText(inputs: readonly StageInputFile[], files: InlinedFiles): Promise<string> {
  const shown: string[] = [];
  for (const input of inputs) {
    const file = input.isDirectory ? { path: `${input.path}/`, description: 'a folder: its files are in the workspace' } : await files.show(input.path, undefined, true);
    shown.push(formatFile(file, '###'));
  }
  return shown.join('\n\n');
}

/** The agent file applied to the stage, and its step template (a file, or the inline `prompt:`) rendered. */
async function renderTask(options: AssemblePromptOptions, fill: { context: string; files: () => Promise<string> }): Promise<{ agent?: AgentDefinition; stage: ResolvedStage; task: string }> {
  const { baseDir, context } = options;
  const stageId = options.stage.id;
  const agent = options.stage.agent ? await loadAgentFile(baseDir, options.stage.agent, stageId) : undefined;
  const stage = agent ? applyAgentDefaults(options.stage, agent.frontmatter) : options.stage;
  const source = stage.prompt ? resolvePromptSource(baseDir, stage.prompt, options.promptsDir) : ({ kind: 'inline' } as const);
  if (source.kind === 'missing') {
    throw stageFailure({ type: 'FILE_NOT_FOUND', stageId, message: missingPromptMessage(stage.prompt, source.tried), details: { field: 'prompt', tried: source.tried } });
  }
  const templateName = source.kind === 'file' ? path.resolve(baseDir, source.relative) : `stage ${stageId} prompt (inline)`;
  const template = source.kind === 'file' ? (await readPipelineFile(baseDir, source.relative, stageId, 'prompt')).text : stage.prompt;
  const extra: Record<string, string> = { 'stage.id': stageId, ...(options.contextFiles?.length ? { [CONTEXT_VARIABLE]: fill.context } : {}) };
  // Read only when the prompt places them (the wrapper shows or names a stage's inputs itself).
  if ((options.stage.inputs?.length ?? 0) > 0 && listTemplateVariables(template).includes(FILES_VARIABLE)) extra[FILES_VARIABLE] = await fill.files();
  const task = withTemplateErrors(stageId, () => renderTemplate(template, context, templateName, extra, stage.templateSyntax));
  return { agent, stage, task };
}

/** The size bound on file content inlined in one prompt, shared by context files, inputs and earlier work. */
class InlinedFiles {
  /** @unit bytes */
  remaining = MAX_INLINE_TOTAL_BYTES;
  /** Files whose content the bound left out. */
  omitted = 0;

  /** @param inline whether the backend needs file content in the prompt (it cannot read files) */
  constructor(
    private readonly workspaceDir: string,
    public inline: boolean,
  ) {}

  /** The most the next file may inline. @unit bytes */
  get nextLimit(): number {
    return Math.min(MAX_INLINE_FILE_BYTES, this.remaining);
  }

  count(excerpt: FileExcerpt): void {
    this.remaining -= Buffer.byteLength(excerpt.text);
  }

  /**
   * A workspace file for the prompt: its path, and its content too when the backend needs it (or `always`, for
   * `{{files}}`) and the bound allows.
   */
  async show(relative: string, description?: string, always = false): Promise<PromptFile> {
    const file = resolveInside(this.workspaceDir, relative);
    if (!(this.inline || always) || !file) return { path: relative, description };
    if (this.remaining <= 0) {
      this.omitted++;
      return { path: relative, description, omitted: true };
    }
    // Inside the workspace once symlinks are followed: an agent may have made the file, or a folder above it, a link.
    const read = await readFileExcerpt(file, this.nextLimit, this.workspaceDir).catch((err: NodeJS.ErrnoException) => err);
    if (read instanceof Error) {
      const why = read.code === 'EOUTSIDE' ? 'a symlink leading outside the workspace: not shown' : 'no longer in the workspace';
      return { path: relative, description: `${description ? `${description}; ` : ''}${why}` };
    }
    const excerpt = read;
    this.count(excerpt);
    return { path: relative, description, excerpt };
  }
}

/** Earlier stages' summaries and the files they wrote (a file the inputs showed already is only named). */
async function showEarlierWork(
  stages: Record<string, TemplateStage>,
  stage: ResolvedStage,
  inputs: readonly StageInputFile[],
  files: InlinedFiles,
): Promise<PromptParts['earlier']> {
  const earlier: PromptParts['earlier'] = [];
  for (const [writer, prior] of orderEarlierStages(stages, needIds(stage))) {
    const shown: PromptFile[] = [];
    for (const artifact of prior.artifacts) {
      const shownAbove = inputs.some((i) => i.path === artifact);
      shown.push(shownAbove ? { path: artifact, description: 'shown above' } : await files.show(artifact));
    }
    earlier.push({ stageId: writer, summary: prior.summary, files: shown });
  }
  return earlier;
}

/** Stages this one `needs` first (their work matters most when the size bound cuts), then the rest. */
function orderEarlierStages(stages: Record<string, TemplateStage>, needs: readonly string[]): [string, TemplateStage][] {
  const entries = Object.entries(stages);
  return [...entries.filter(([id]) => needs.includes(id)), ...entries.filter(([id]) => !needs.includes(id))];
}

/** Runs `render`, turning a template error into the catalogue's TEMPLATE_VARIABLE_UNKNOWN. */
export function withTemplateErrors<T>(stageId: string, render: () => T): T {
  try {
    return render();
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    throw stageFailure({
      type: 'TEMPLATE_VARIABLE_UNKNOWN',
      stageId,
      message: err.message.replace(/^\[TEMPLATE_VARIABLE_UNKNOWN\] /, ''),
      details: { template: err.template, variables: err.variables },
    });
  }
}
