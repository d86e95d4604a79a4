import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { isNode, isScalar, LineCounter, parseDocument, Scalar, type Document } from 'yaml';
import { loadAgentFile } from '../activities/prompt/agent-file.js';
import { missingPromptMessage, resolvePromptSource } from '../activities/prompt/prompt-source.js';
import { loadSystemPrompt, OUTPUT_CONTRACT_VARIABLE, STAGE_PROMPT_VARIABLE } from '../activities/prompt/system-prompt.js';
import { PipelineValidationError, formatPath } from '../pipeline/errors.js';
import { findAncestors } from '../pipeline/graph.js';
import { extraBackendNames } from '../config.js';
import { parsePipeline } from '../pipeline/parse.js';
import type { PipelineDefinition, StageDefinition } from '../pipeline/schema.js';
import { isReservedVariable, listTemplateVariables } from '../pipeline/template.js';

/** One problem `validate` reports: which file, where in it, and what is wrong. */
export interface ValidationProblem {
  file: string;
  line?: number;
  /** YAML path in the pipeline file (`stages[2].agent`), or the template variable (`{{inputs.x}}`). */
  field: string;
  message: string;
}

export interface ValidationReport {
  file: string;
  pipeline?: PipelineDefinition;
  problems: ValidationProblem[];
  /** Worth knowing, not wrong: `{{names}}` a passthrough template hands to the agent as written, optional files that are absent. */
  notes: ValidationProblem[];
}

/**
 * Checks a pipeline file the way a run would use it, without starting anything: the schema and stage graph, that
 * agent, prompt, context and system prompt files exist and parse, and that every template variable is one the stage
 * will have (declared inputs, stages it runs after, run and attempt fields).
 */
export async function validatePipelineFile(file: string): Promise<ValidationReport> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { file, problems: [{ file, field: '', message: `cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` }], notes: [] };
  }
  let pipeline: PipelineDefinition;
  try {
    pipeline = parsePipeline(text, file, { backends: extraBackendNames() });
  } catch (err) {
    if (!(err instanceof PipelineValidationError)) throw err;
    return { file, problems: err.problems.map((p) => ({ file, line: p.line, field: p.path, message: p.message })), notes: [] };
  }
  const baseDir = path.dirname(path.resolve(file));
  const locator = new FieldLocator(text);
  const problems: ValidationProblem[] = [];
  const notes: ValidationProblem[] = [];
  const at = (fieldPath: PropertyKey[], message: string): void => {
    problems.push({ file, line: locator.line(fieldPath), field: formatPath(fieldPath), message });
  };

  for (const [i, entry] of (pipeline.context ?? []).entries()) {
    const { path: relative, optional } = typeof entry === 'string' ? { path: entry, optional: false } : entry;
    if (await isFile(path.resolve(baseDir, relative))) continue;
    const message = `context file ${path.resolve(baseDir, relative)} does not exist`;
    if (optional) notes.push({ file, line: locator.line(['context', i]), field: formatPath(['context', i]), message: `${message} (optional: stages get a note instead)` });
    else at(['context', i], message);
  }
  if (pipeline.promptsDir && !(await isDirectory(path.resolve(baseDir, pipeline.promptsDir)))) {
    at(['promptsDir'], `folder ${path.resolve(baseDir, pipeline.promptsDir)} does not exist`);
  }
  if (pipeline.systemPrompt) {
    try {
      const { text: template } = await loadSystemPrompt(baseDir, pipeline.systemPrompt, '(pipeline)');
      const known = (v: string): boolean => v === STAGE_PROMPT_VARIABLE || v === OUTPUT_CONTRACT_VARIABLE || v === 'stage.id' || isRunVariable(v);
      problems.push(...unknownVariables(template, path.resolve(baseDir, pipeline.systemPrompt), known).map((p) => ({ ...p, field: `systemPrompt ${p.field}` })));
    } catch (err) {
      at(['systemPrompt'], (err as Error).message);
    }
  }
  if (pipeline.workspace) {
    if (!(await isDirectory(path.resolve(baseDir, pipeline.workspace.repo)))) at(['workspace', 'repo'], `folder ${path.resolve(baseDir, pipeline.workspace.repo)} does not exist`);
    const inputs = Object.keys(pipeline.inputs ?? {});
    for (const v of listTemplateVariables(pipeline.workspace.branch ?? '')) {
      if (!(v === 'run.id' || v === 'run.pipeline' || (v.startsWith('inputs.') && inputs.includes(v.slice(7))))) {
        at(['workspace', 'branch'], `{{${v}}} is not known when the run starts; use run.id, run.pipeline or a declared input`);
      }
    }
  }

  const allStages = new Set(pipeline.stages.map((s) => s.id));
  for (const [field, template] of Object.entries(pipeline.workspace?.pullRequest ?? {})) {
    if (typeof template !== 'string') continue;
    for (const p of unknownVariables(template, file, (v) => isStageVariable(v, pipeline, allStages))) at(['workspace', 'pullRequest', field], `${p.field}: ${p.message}`);
  }
  const stageEntries: [string, number, StageDefinition][] = [
    ...pipeline.stages.map((s, i): [string, number, StageDefinition] => ['stages', i, s]),
    ...(pipeline.finally ?? []).map((s, i): [string, number, StageDefinition] => ['finally', i, s]),
  ];
  const mainIds = new Set(pipeline.stages.map((s) => s.id));
  for (const [list, i, stage] of stageEntries) {
    const isFinally = list === 'finally';
    // A `finally` stage runs after every other stage has ended, and may read any of them and how the run ended.
    const ancestors = isFinally ? mainIds : findAncestors(pipeline.stages, stage.id);
    const known = (v: string): boolean => isStageVariable(v, pipeline, ancestors) || (isFinally && (v === 'run.status' || v === 'run.error'));
    const passthrough = (stage.templateSyntax ?? pipeline.templateSyntax) === 'passthrough';
    /** Unknown variables: problems, or notes for names a passthrough template hands on as written. */
    const report = (found: ValidationProblem[]): void => {
      for (const p of found) {
        const name = p.field.slice(p.field.indexOf('{{') + 2, p.field.lastIndexOf('}}'));
        if (passthrough && !isReservedVariable(name)) notes.push({ ...p, message: 'passed to the agent as written (templateSyntax: passthrough)' });
        else problems.push(p);
      }
    };
    const commitMessage = stage.commitMessage ?? pipeline.defaults?.commitMessage;
    if (commitMessage) {
      for (const p of unknownVariables(commitMessage, file, known)) at([list, i, stage.commitMessage ? 'commitMessage' : 'id'], `commitMessage ${p.field}: ${p.message}`);
    }
    if (stage.agent) {
      try {
        await loadAgentFile(baseDir, stage.agent, stage.id);
      } catch (err) {
        at([list, i, 'agent'], (err as Error).message);
      }
    }
    const source = stage.prompt ? resolvePromptSource(baseDir, stage.prompt, pipeline.promptsDir) : undefined;
    if (stage.prompt && source?.kind === 'missing') at([list, i, 'prompt'], missingPromptMessage(stage.prompt, source.tried));
    else if (stage.prompt && source?.kind === 'file') {
      const promptFile = path.resolve(baseDir, source.relative);
      const template = await readFile(promptFile, 'utf8').catch(() => undefined);
      if (template === undefined) at([list, i, 'prompt'], `prompt file ${promptFile} does not exist`);
      else report(unknownVariables(template, promptFile, known).map((p) => ({ ...p, field: `${list}[${i}].prompt ${p.field}` })));
    } else if (stage.prompt) {
      // Inline template: its lines count from where the text starts in the pipeline file.
      const first = locator.textLine([list, i, 'prompt']);
      report(unknownVariables(stage.prompt, file, known).map((p) => ({ ...p, line: first && p.line ? first + p.line - 1 : first, field: `${list}[${i}].prompt ${p.field}` })));
    }
    if (stage.output && !stage.agent && (stage.backend ?? pipeline.defaults?.backend ?? 'claude-cli') === 'claude-cli') {
      notes.push({ file, line: locator.line([list, i, 'output']), field: formatPath([list, i, 'output']), message: 'output: applies to anthropic-api stages; a claude-cli agent writes its own files (list them under expects:)' });
    }
    if (stage.output) {
      const outputKnown = (v: string): boolean => v === 'stage.id' || v === 'run.id' || v === 'run.pipeline' || v === 'attempt' || (v.startsWith('inputs.') && Object.hasOwn(pipeline.inputs ?? {}, v.slice(7)));
      problems.push(...unknownVariables(stage.output, file, outputKnown).map((p) => ({ ...p, line: locator.line([list, i, 'output']), field: `${list}[${i}].output ${p.field}` })));
    }
    for (const [j, dir] of (stage.addDirs ?? []).entries()) {
      if (!(await isDirectory(path.resolve(baseDir, dir)))) at([list, i, 'addDirs', j], `folder ${path.resolve(baseDir, dir)} does not exist`);
    }
    for (const [j, input] of (stage.inputs ?? []).entries()) {
      if (typeof input === 'object' && input.from && !ancestors.has(input.from)) {
        at([list, i, 'inputs', j, 'from'], `stage "${stage.id}" does not run after "${input.from}"; add it to needs`);
      }
    }
  }
  return { file, pipeline, problems, notes };

  function isRunVariable(v: string): boolean {
    return v === 'run.id' || v === 'run.pipeline' || v === 'attempt' || (v.startsWith('inputs.') && Object.hasOwn(pipeline.inputs ?? {}, v.slice(7)));
  }
}

/** True for a variable a stage's prompt may use: inputs, run fields, attempt, and results of stages it runs after. */
function isStageVariable(v: string, pipeline: PipelineDefinition, ancestors: ReadonlySet<string>): boolean {
  if (['run.id', 'run.pipeline', 'attempt', 'previous.failed', 'stage.id'].includes(v)) return true;
  if (pipeline.workspace && ['workspace.diff', 'workspace.branch', 'workspace.base'].includes(v)) return true;
  const [kind, name, field, ...rest] = v.split('.');
  if (kind === 'inputs') return field === undefined && Object.hasOwn(pipeline.inputs ?? {}, name);
  if (kind === 'stages') {
    if (!ancestors.has(name)) return false;
    return ['summary', 'artifacts', 'status', 'error'].includes(field) ? rest.length === 0 : field === 'outputs' && rest.length > 0;
  }
  return false;
}

/** Template variables `known` rejects, each located by line in `file`. */
function unknownVariables(template: string, file: string, known: (v: string) => boolean): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const lines = template.split('\n');
  for (const v of listTemplateVariables(template)) {
    if (known(v)) continue;
    const line = lines.findIndex((l) => l.includes(v)) + 1;
    const hint = v.startsWith('stages.')
      ? `the stage does not run after "${v.split('.')[1]}" (add it to needs), or the field is not summary, artifacts or outputs.KEY`
      : v.startsWith('inputs.')
        ? 'the pipeline declares no such input (add it under inputs:)'
        : 'known: inputs.NAME, stages.ID.summary|artifacts|status|error|outputs.KEY, run.id, run.pipeline, attempt, previous.failed ' +
          '(run.status and run.error in `finally` stages); set `templateSyntax: passthrough` to hand other {{names}} to the agent as written';
    problems.push({ file, line: line || undefined, field: `{{${v}}}`, message: `unknown template variable: ${hint}` });
  }
  return problems;
}

/** Finds the line of a field in the pipeline file, or of its nearest parent that exists. */
class FieldLocator {
  private readonly lineCounter = new LineCounter();
  private readonly doc: Document;

  constructor(text: string) {
    this.doc = parseDocument(text, { lineCounter: this.lineCounter });
  }

  line(fieldPath: readonly PropertyKey[]): number | undefined {
    for (let depth = fieldPath.length; depth >= 0; depth--) {
      const node = depth === 0 ? this.doc.contents : this.doc.getIn(fieldPath.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) return this.lineCounter.linePos(node.range[0]).line;
    }
    return undefined;
  }

  /** The line where a text field's value starts: the line after `|` or `>` for block scalars. */
  textLine(fieldPath: readonly PropertyKey[]): number | undefined {
    const node = this.doc.getIn(fieldPath as unknown[], true);
    const line = this.line(fieldPath);
    if (!isScalar(node) || line === undefined) return line;
    return node.type === Scalar.BLOCK_LITERAL || node.type === Scalar.BLOCK_FOLDED ? line + 1 : line;
  }
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false;
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await stat(dir).catch(() => undefined))?.isDirectory() ?? false;
}
