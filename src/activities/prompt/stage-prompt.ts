import path from 'node:path';
import { needIds } from '../../pipeline/graph.js';
import type { ContextFile } from '../../pipeline/schema.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { renderTemplate, TemplateError, type TemplateContext, type TemplateStage } from '../../pipeline/template.js';
import { applyAgentDefaults, loadAgentFile, type AgentDefinition } from './agent-file.js';
import { stageFailure } from '../failures.js';
import { readFileExcerpt } from './file-excerpt.js';
import { readPipelineFile } from './pipeline-file.js';
import { composePrompt, type PromptFile, type ReworkRound, type StagePrompt } from './compose.js';
import { missingPromptMessage, resolvePromptSource } from './prompt-source.js';
import { resolveStageInputs } from './stage-inputs.js';
import { loadSystemPrompt } from './system-prompt.js';
import { resolveInside } from '../workspace/run-workspace.js';

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
 * declared inputs and (for the API backend, which cannot read files) earlier stages' artifacts.
 * @throws FILE_NOT_FOUND, INPUT_NOT_FOUND, TEMPLATE_VARIABLE_UNKNOWN, CONFIG_INVALID
 */
export async function assemblePrompt(options: AssemblePromptOptions): Promise<AssembledPrompt> {
  const { baseDir, context } = options;
  const stageId = options.stage.id;
  const agent: AgentDefinition | undefined = options.stage.agent ? await loadAgentFile(baseDir, options.stage.agent, stageId) : undefined;
  const stage = agent ? applyAgentDefaults(options.stage, agent.frontmatter) : options.stage;
  const warnings = [...(agent?.warnings ?? [])];
  const inline = stage.backend === 'anthropic-api';

  const source = stage.prompt ? resolvePromptSource(baseDir, stage.prompt, options.promptsDir) : ({ kind: 'inline' } as const);
  if (source.kind === 'missing') {
    throw stageFailure({ type: 'FILE_NOT_FOUND', stageId, message: missingPromptMessage(stage.prompt, source.tried), details: { field: 'prompt', tried: source.tried } });
  }
  const templateName = source.kind === 'file' ? path.resolve(baseDir, source.relative) : `stage ${stageId} prompt (inline)`;
  const template = source.kind === 'file' ? (await readPipelineFile(baseDir, source.relative, stageId, 'prompt')).text : stage.prompt;
  const task = withTemplateErrors(stageId, () => renderTemplate(template, context, templateName, { 'stage.id': stageId }, stage.templateSyntax));
  const systemPrompt = await loadSystemPrompt(baseDir, options.systemPromptFile, stageId);
  const { found: inputs, missingOptional } = await resolveStageInputs(options.workspaceDir, stageId, stage.inputs ?? [], context.stages);
  const notes = missingOptional.map((p) => `The optional input file ${p} does not exist in the workspace; work without it.`);

  const budget = { remaining: MAX_INLINE_TOTAL_BYTES, omitted: 0 };
  const projectContext: PromptFile[] = [];
  for (const entry of options.contextFiles ?? []) {
    const { path: relative, optional } = typeof entry === 'string' ? { path: entry, optional: false } : entry;
    const file = path.resolve(baseDir, relative);
    const excerpt = await readFileExcerpt(file, Math.min(MAX_INLINE_FILE_BYTES, budget.remaining)).catch((err: NodeJS.ErrnoException) => {
      if (optional && err.code === 'ENOENT') return undefined;
      throw stageFailure({
        type: 'FILE_NOT_FOUND',
        stageId,
        message: `cannot read context file ${file} (\`context: ${relative}\`, ${err.code ?? 'error'})`,
        details: { field: 'context', path: file },
      });
    });
    if (!excerpt) {
      notes.push(`The optional context file ${relative} does not exist; no such context is available, so work without it.`);
      continue;
    }
    budget.remaining -= Buffer.byteLength(excerpt.text);
    projectContext.push({ path: relative, excerpt });
  }

  /** A workspace file for the prompt: its path for the CLI, its content too for the API while the size bound allows. */
  const show = async (relative: string, description?: string): Promise<PromptFile> => {
    const file = resolveInside(options.workspaceDir, relative);
    if (!inline || !file) return { path: relative, description };
    if (budget.remaining <= 0) {
      budget.omitted++;
      return { path: relative, description, omitted: true };
    }
    const excerpt = await readFileExcerpt(file, Math.min(MAX_INLINE_FILE_BYTES, budget.remaining)).catch(() => undefined);
    if (!excerpt) return { path: relative, description: `${description ? `${description}; ` : ''}no longer in the workspace` };
    budget.remaining -= Buffer.byteLength(excerpt.text);
    return { path: relative, description, excerpt };
  };

  const inputFiles: PromptFile[] = [];
  for (const input of inputs) {
    const description = input.writer ? `written by stage ${input.writer}` : undefined;
    inputFiles.push(input.isDirectory ? { path: `${input.path}/`, description } : await show(input.path, description));
  }
  const earlier: { stageId: string; summary: string; files: PromptFile[] }[] = [];
  for (const [stageIdOfWriter, prior] of orderEarlierStages(context.stages, needIds(stage))) {
    const files: PromptFile[] = [];
    for (const artifact of prior.artifacts) {
      const shownAbove = inputs.some((i) => i.path === artifact);
      files.push(shownAbove ? { path: artifact, description: 'shown above' } : await show(artifact));
    }
    earlier.push({ stageId: stageIdOfWriter, summary: prior.summary, files });
  }
  if (budget.omitted > 0) {
    warnings.push(`the prompt left out the content of ${budget.omitted} file(s) to stay under ${MAX_INLINE_TOTAL_BYTES} bytes of inlined files`);
  }

  const prompt = withTemplateErrors(stageId, () =>
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
