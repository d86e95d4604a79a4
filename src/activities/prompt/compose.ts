import type { ReworkRound } from '../../contracts/stage-attempt.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { listTemplateVariables, renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import type { FileExcerpt } from './file-excerpt.js';
import { formatObjectInput, parseObjectInput } from '../../pipeline/object-inputs.js';
import { FREE_ANSWER_CONTRACT, OUTPUT_CONTRACT, OUTPUT_CONTRACT_VARIABLE, STAGE_PROMPT_VARIABLE, type SystemPromptTemplate } from './system-prompt.js';

/*
 * Composes a stage's prompt from parts already read from disk. Pure: no file access, so every
 * section's shape is unit-tested.
 */

/** What a stage attempt sends to its backend. */
export interface StagePrompt {
  /** The persona (agent body and references) and stage additions: `--append-system-prompt` for the CLI, `system` for the API. */
  system: string;
  /** The task wrapped in the system prompt: sent on stdin to the CLI, as the user message to the API. */
  user: string;
  /**
   * API backend only: the large, stable parts, sent ahead of `system` as their own system blocks so that each can
   * be a prompt-cache breakpoint: the pipeline's context files first (the same for every stage of a run, so
   * stages share their cache), then the input files and earlier stages' work. The CLI gets these in `user`.
   */
  context?: string[];
}

/** A file shown to the agent: by path, and with its content when the backend cannot read files. */
export interface PromptFile {
  path: string;
  /** Where it came from, e.g. `written by stage spec`. */
  description?: string;
  /** Present when the content is inlined. */
  excerpt?: FileExcerpt;
  /** Set when the content was not inlined because the prompt's size bound was reached. */
  omitted?: boolean;
}

/** Everything a stage prompt is built from. */
export interface PromptParts {
  stage: ResolvedStage;
  context: TemplateContext;
  /** The rendered step template; empty when the agent file alone says what to do. */
  task: string;
  persona?: string;
  agentDescription?: string;
  systemPrompt: SystemPromptTemplate;
  /** Pipeline `context:` files, always inlined. */
  projectContext: PromptFile[];
  /** The stage's declared `inputs:`. */
  inputs: PromptFile[];
  /** Earlier stages: summary and the files they wrote. */
  earlier: { stageId: string; summary: string; files: PromptFile[] }[];
  reworkHistory?: ReworkRound[];
  /** True when files are inlined (API backend); the CLI reads them from its working directory. */
  inline: boolean;
  /** The stage's spend cap for this attempt. @unit US dollars */
  maxBudgetUsd?: number;
  /** Things the agent should know about its inputs, e.g. an optional file that does not exist. */
  notes?: string[];
}

/** Builds the system and user prompt. @throws TemplateError when the system prompt uses an unknown variable */
export function composePrompt(parts: PromptParts): StagePrompt {
  const { stage, context } = parts;
  const projectContext = section('Project context', parts.projectContext.map((f) => formatFile(f, '###')).join('\n\n'));
  const work = [
    section('Input files', parts.inline ? parts.inputs.map((f) => formatFile(f, '###')).join('\n\n') : ''),
    section('Work from earlier stages', parts.earlier.map((s) => formatEarlierStage(s, parts.inline)).join('\n\n')),
  ]
    .filter(Boolean)
    .join('\n\n');
  const stagePrompt = [
    section('Your task', parts.task.trim() || `Do the work your instructions describe${parts.agentDescription ? ` (${parts.agentDescription.trim()})` : ''}.`),
    section('Stage requirements', requirementLines(parts).join('\n')),
    section('Notes', (parts.notes ?? []).map((note) => `- ${note}`).join('\n')),
    section('Run inputs', formatRunInputs(context)),
    parts.inline ? '' : projectContext,
    parts.inline ? '' : work,
    section('Reviewer feedback from earlier rounds', (parts.reworkHistory ?? []).map(formatRework).join('\n\n')),
    section('Previous attempt', context.previous?.failed ? `The previous attempt did not succeed: ${context.previous.failed}\nFiles it wrote are still in the workspace.` : ''),
  ]
    .filter(Boolean)
    .join('\n\n');

  const wrapper = parts.systemPrompt;
  const user = renderTemplate(
    wrapper.text,
    context,
    wrapper.name,
    { [STAGE_PROMPT_VARIABLE]: stagePrompt, [OUTPUT_CONTRACT_VARIABLE]: contractFor(stage), 'stage.id': stage.id },
    stage.templateSyntax,
  );
  const system = composeSystem(stage, parts.persona, wrapper, context);
  if (!parts.inline) return { system, user };
  return { system, user, context: [projectContext, work].filter(Boolean) };
}

/** What the agent is told about how its answer ends: the report block, or (with `contract: none`) nothing to add. */
function contractFor(stage: ResolvedStage): string {
  return stage.contract === 'none' ? FREE_ANSWER_CONTRACT : OUTPUT_CONTRACT;
}

/**
 * The system channel: persona, the stage's additions (`appendSystemPrompt`, filled like the prompt), and the contract
 * when the system prompt does not place it. Without a `context` (an agent started ahead of time) the additions must
 * use no variables.
 * @throws TemplateError for a variable the context does not define
 */
export function composeSystem(stage: ResolvedStage, persona: string | undefined, wrapper: SystemPromptTemplate, context?: TemplateContext): string {
  // The contract is how the answer is read: when a custom system prompt leaves it out, it still reaches the agent.
  const contractPlaced = listTemplateVariables(wrapper.text).includes(OUTPUT_CONTRACT_VARIABLE);
  const append = stage.appendSystemPrompt?.trim();
  const filled =
    append && context
      ? renderTemplate(append, context, `stage ${stage.id} appendSystemPrompt`, { 'stage.id': stage.id }, stage.templateSyntax)
      : append;
  return [persona?.trim(), filled, contractPlaced ? '' : contractFor(stage)].filter(Boolean).join('\n\n');
}

function section(title: string, body: string): string {
  return body.trim() ? `## ${title}\n${body}` : '';
}

function requirementLines(parts: PromptParts): string[] {
  const { stage } = parts;
  const lines: string[] = [];
  if (stage.description) lines.push(`- ${stage.description.trim()}`);
  if (parts.inputs.length > 0) {
    const where = parts.inline ? 'shown in your instructions' : 'in your working directory';
    lines.push(`- Read these input files first (${where}): ${parts.inputs.map((f) => f.path + (f.description ? ` (${f.description})` : '')).join(', ')}`);
  }
  if (!parts.inline && stage.allowedTools?.length) lines.push(`- Tools you may use: ${stage.allowedTools.join(', ')}`);
  if (parts.maxBudgetUsd !== undefined) lines.push(`- Spend at most $${parts.maxBudgetUsd.toFixed(2)} on this stage.`);
  return lines;
}

function formatEarlierStage(stage: PromptParts['earlier'][number], inline: boolean): string {
  const head = `### ${stage.stageId}: ${stage.summary.trim() || '(no summary)'}`;
  if (stage.files.length === 0) return head;
  if (!inline) return `${head}\nFiles (in your working directory): ${stage.files.map((f) => f.path).join(', ')}`;
  return [head, ...stage.files.map((f) => formatFile(f, '####'))].join('\n\n');
}

/** A file under a heading: its content in a fence long enough for the content's own backticks. */
export function formatFile(file: PromptFile, heading: string): string {
  const title = `${heading} ${file.path}${file.description ? ` (${file.description})` : ''}`;
  const { excerpt } = file;
  if (file.omitted) return `${title}\n[not shown: the prompt's size bound was reached; the file is in the workspace]`;
  if (!excerpt) return title;
  if (excerpt.binary) return `${title}\n[binary file, ${excerpt.bytes} bytes, not shown]`;
  const longestRun = Math.max(0, ...[...excerpt.text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(Math.max(3, longestRun + 1));
  const note = excerpt.cut ? `\n[cut: showing the first ${Buffer.byteLength(excerpt.text)} of ${excerpt.bytes} bytes]` : '';
  return `${title}\n${fence}\n${excerpt.text}${excerpt.text.endsWith('\n') ? '' : '\n'}${fence}${note}`;
}

function formatRework(round: ReworkRound): string {
  const items = round.feedback.map((item) => `- ${typeof item === 'string' ? item : JSON.stringify(item)}`);
  return [`### Round ${round.round}, reviewer ${round.reviewer}: ${round.summary}`, ...items].join('\n');
}

/** The run's inputs as `- name: value` lines; an object input as its `key: value` lines under its name. */
function formatRunInputs(context: TemplateContext): string {
  return Object.entries(context.inputs)
    .map(([name, value]) => {
      const parsed = context.objectInputs?.includes(name) ? parseObjectInput(value) : undefined;
      return parsed && 'value' in parsed ? `- ${name}:\n${formatObjectInput(parsed.value, '  ')}` : `- ${name}: ${value}`;
    })
    .join('\n');
}
