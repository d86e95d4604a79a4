import { stat } from 'node:fs/promises';
import path from 'node:path';
import { loadAgentFile } from '../activities/prompt/agent-file.js';
import { MAX_PIPELINE_FILE_BYTES } from '../activities/prompt/pipeline-file.js';
import { readRegularFile, RegularFileError } from '../files/regular-file.js';
import { missingPromptMessage, resolvePromptSource } from '../activities/prompt/prompt-source.js';
import { loadSystemPrompt, OUTPUT_CONTRACT_VARIABLE, STAGE_PROMPT_VARIABLE } from '../activities/prompt/system-prompt.js';
import { formatPath } from '../pipeline/errors.js';
import { findAncestors } from '../pipeline/graph.js';
import { isCommandStage } from '../pipeline/command-stage.js';
import { FieldLocator } from '../pipeline/field-locator.js';
import { findLocalHosts, localHostMessage } from '../pipeline/local-hosts.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import { resolveStage } from '../pipeline/stage-options.js';
import type { StageDefinition } from '../pipeline/stage-schema.js';
import { sandboxOptionOff, stageMayUseBash, stageOptsOutOfSandbox } from '../pipeline/stage-tools.js';
import { FILES_VARIABLE, isReservedVariable, listTemplateVariables } from '../pipeline/template.js';
import type { PipelineProblemReport } from './errors.js';
import { backendFieldNotes } from './backend-field-notes.js';
import { findMcpServerProblems } from './mcp-server-checks.js';
import { isRunEndVariable, isStageVariable, unknownVariables } from './template-variable-checks.js';

/** The list a stage sits in: the pipeline's `stages`, or its `finally` stages. */
export type StageList = 'stages' | 'finally';

/** The checks of one parsed pipeline, collecting problems and notes located by field and line. */
export class PipelineChecks {
  readonly problems: PipelineProblemReport[] = [];
  readonly notes: PipelineProblemReport[] = [];
  private readonly locator: FieldLocator;
  private readonly mainIds: ReadonlySet<string>;
  /** The problems of `defaults:` templates so far, by field and message, with the stages that take them. */
  private readonly defaultsProblems = new Map<string, { report: PipelineProblemReport; stages: string[] }>();

  constructor(
    private readonly pipeline: PipelineDefinition,
    private readonly file: string,
    private readonly baseDir: string,
    text: string,
    /** False: leave out the checks that read the files the pipeline names. */
    private readonly checkFiles: boolean,
  ) {
    this.locator = FieldLocator.fromText(text);
    this.mainIds = new Set(pipeline.stages.map((s) => s.id));
  }

  /** Context files, the prompts folder, the system prompt and its variables, the workspace repository. */
  async checkPipelineFiles(): Promise<void> {
    const { pipeline, baseDir } = this;
    for (const [i, entry] of (pipeline.context ?? []).entries()) {
      const { path: relative, optional, from } = typeof entry === 'string' ? { path: entry, optional: false, from: undefined } : entry;
      // Read from the run's workspace when each stage starts: it may not exist yet, or only on the worker.
      if (from === 'workspace' || (await isFile(path.resolve(baseDir, relative)))) continue;
      const message = `context file ${path.resolve(baseDir, relative)} does not exist`;
      if (optional) this.noteAt(['context', i], `${message} (optional: stages get a note instead)`);
      else this.problemAt(['context', i], message);
    }
    if (pipeline.promptsDir && !(await isDirectory(path.resolve(baseDir, pipeline.promptsDir)))) {
      this.problemAt(['promptsDir'], `folder ${path.resolve(baseDir, pipeline.promptsDir)} does not exist`);
    }
    if (pipeline.systemPrompt) await this.checkSystemPrompt(pipeline.systemPrompt);
    const repo = pipeline.workspace?.repo;
    if (repo !== undefined && !(await isDirectory(path.resolve(baseDir, repo)))) {
      this.problemAt(['workspace', 'repo'], `folder ${path.resolve(baseDir, repo)} does not exist`);
    }
    const dir = pipeline.workspace?.dir;
    // A templated folder (`{{inputs.worktree}}`) is known only when the run starts.
    if (dir !== undefined && listTemplateVariables(dir).length === 0 && !(await isDirectory(path.resolve(baseDir, dir)))) {
      this.problemAt(['workspace', 'dir'], `folder ${path.resolve(baseDir, dir)} does not exist; \`workspace.dir\` names an existing folder (the worker never creates it)`);
    }
  }

  /**
   * Hosts of `sandbox.allowedDomains` that are this machine or its link-local network (`localhost`, `127.1`,
   * `169.254.169.254`): refused unless `allowLocal` (AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL), as the workers refuse them.
   */
  checkSandboxHosts(allowLocal: boolean): void {
    if (allowLocal) return;
    for (const entry of findLocalHosts(this.pipeline)) this.problemAt(entry.path, localHostMessage(entry));
  }

  /** The MCP servers' `env` names and, unless `allowLocal`, their `url` hosts, as the workers check them. */
  checkMcpServers(allowLocal: boolean): void {
    for (const problem of findMcpServerProblems(this.pipeline, allowLocal)) this.problemAt(problem.path, problem.message);
  }

  /** The templates filled once per run: the workspace branch (when the run starts) and the pull request (at the end). */
  checkRunTemplates(): void {
    const { pipeline } = this;
    const inputs = Object.keys(pipeline.inputs ?? {});
    for (const v of listTemplateVariables(pipeline.workspace?.dir ?? '')) {
      if (!(v === 'run.id' || v === 'run.pipeline' || (v.startsWith('inputs.') && inputs.includes(v.slice(7))))) {
        this.problemAt(['workspace', 'dir'], `{{${v}}} is not known when the run starts; use run.id, run.pipeline or a declared input`);
      }
    }
    for (const v of listTemplateVariables(pipeline.workspace?.branch ?? '')) {
      if (!(v === 'run.id' || v === 'run.pipeline' || (v.startsWith('inputs.') && inputs.includes(v.slice(7))))) {
        this.problemAt(['workspace', 'branch'], `{{${v}}} is not known when the run starts; use run.id, run.pipeline or a declared input`);
      }
    }
    for (const [field, template] of Object.entries(pipeline.workspace?.pullRequest ?? {})) {
      if (typeof template !== 'string') continue;
      for (const p of unknownVariables(template, this.file, (v) => isStageVariable(v, pipeline, this.mainIds))) {
        this.problemAt(['workspace', 'pullRequest', field], `${p.field}: ${p.message}`);
      }
    }
  }

  /** A stage's templates (commit message, prompt, output path), its agent file, extra folders and inputs. */
  async checkStage(list: StageList, i: number, stage: StageDefinition): Promise<void> {
    const { pipeline, file, baseDir } = this;
    const isFinally = list === 'finally';
    // A `finally` stage runs after every other stage has ended, and may read any of them and how the run ended.
    const ancestors = isFinally ? this.mainIds : findAncestors(pipeline.stages, stage.id);
    const known = (v: string): boolean => isStageVariable(v, pipeline, ancestors) || (isFinally && isRunEndVariable(v));
    for (const field of ['commitMessage', 'appendSystemPrompt'] as const) {
      const own = stage[field];
      for (const p of unknownVariables(own ?? pipeline.defaults?.[field] ?? '', file, known)) {
        const message = `${field} ${p.field}: ${p.message}`;
        if (own === undefined) this.defaultsProblemAt(field, message, stage.id);
        else this.problemAt([list, i, field], message);
      }
    }
    if (stage.agent && this.checkFiles) {
      const agent = await loadAgentFile(baseDir, stage.agent, stage.id).catch((err: unknown) => this.problemAt([list, i, 'agent'], (err as Error).message));
      // A reference that cannot be read is left out of the persona at run time, with only a warning: say so now.
      for (const warning of agent?.warnings ?? []) this.noteAt([list, i, 'agent'], `${warning.replace(/; the stage ran without it$/, '')}; the stage runs without it (fix the path or remove it from \`references\`)`);
    }
    // `{{files}}` places the stage's declared inputs: only its prompt may, and only when it declares some.
    const promptKnown = (v: string): boolean => known(v) || (v === FILES_VARIABLE && (stage.inputs?.length ?? 0) > 0);
    if (stage.prompt) await this.checkStagePrompt(list, i, stage, stage.prompt, promptKnown);
    if (stage.output) this.checkStageOutput(list, i, stage.output);
    for (const note of backendFieldNotes(stage, this.pipeline.defaults?.backend)) this.noteAt([list, i, note.field], note.message);
    for (const [j, dir] of this.checkFiles ? (stage.addDirs ?? []).entries() : []) {
      if (!(await isDirectory(path.resolve(baseDir, dir)))) this.problemAt([list, i, 'addDirs', j], `folder ${path.resolve(baseDir, dir)} does not exist`);
    }
    for (const [j, input] of (stage.inputs ?? []).entries()) {
      if (typeof input === 'object' && input.from && !ancestors.has(input.from)) {
        this.problemAt([list, i, 'inputs', j, 'from'], `stage "${stage.id}" does not run after "${input.from}"; add it to needs`);
      }
    }
    this.noteSandboxNetwork(list, i, stage);
    this.noteRawPrompt(list, i, stage);
    this.checkCommandEnv(list, i, stage, known);
  }

  /** A command stage's `env:` values are templates filled when it starts, with what its prompt could use. */
  private checkCommandEnv(list: StageList, i: number, stage: StageDefinition, known: (v: string) => boolean): void {
    for (const [name, value] of Object.entries(stage.env ?? {})) {
      for (const p of unknownVariables(value, this.file, known)) this.problemAt([list, i, 'env', name], `${p.field}: ${p.message}`);
    }
    if (isCommandStage(stage) && sandboxOptionOff(resolveStage(this.pipeline, stage).sandbox)) {
      this.noteAt(
        [list, i, 'sandbox'],
        '`sandbox: false` runs the command unsandboxed only on workers whose operator set AGENT_PIPELINE_SANDBOX=permissive (with trusted keys, only in signed runs); any other worker fails the stage with SANDBOX_OPT_OUT_REFUSED before the command starts',
      );
    }
  }

  /** What a `promptFormat: raw` stage gives up: the sections the wrapper adds, and without a report, questions too. */
  private noteRawPrompt(list: StageList, i: number, stage: StageDefinition): void {
    const resolved = resolveStage(this.pipeline, stage);
    if (resolved.promptFormat !== 'raw' || resolved.gateOnly) return;
    const field = stage.promptFormat === undefined ? 'id' : 'promptFormat';
    const lost =
      'promptFormat: raw sends the prompt as written: the agent is not shown the run inputs, context files, input files, earlier stages\' work, ' +
      'reviewer feedback or why the previous attempt failed (place what it needs with {{inputs.…}}, {{context}}, {{files}}, {{stages.….summary}})';
    const contractLost =
      resolved.contract === 'none'
        ? '; with contract: none nothing is added at all, so the agent is not told it may ask a person (a `BLOCKED:` answer still waits for one) and the stage reports no outputs'
        : '; the output contract (the report block, and `BLOCKED:` for a question) is added to the system prompt';
    this.noteAt([list, i, field], lost + contractLost);
  }

  /**
   * A CLI stage whose Bash runs sandboxed, with no word on its network: whatever it fetched before (git, npm) now fails.
   * A stage that asks to go unsandboxed: only some workers run it.
   */
  private noteSandboxNetwork(list: StageList, i: number, stage: StageDefinition): void {
    const resolved = resolveStage(this.pipeline, stage);
    if (resolved.backend === 'claude-cli' && stageOptsOutOfSandbox(resolved)) {
      this.noteAt(
        [list, i, stage.sandbox === undefined ? 'id' : 'sandbox'],
        '`sandbox: false` runs only on workers whose operator set AGENT_PIPELINE_SANDBOX=permissive (with trusted keys, only in signed runs); any other worker fails the stage with SANDBOX_OPT_OUT_REFUSED before its agent starts',
      );
    }
    // A pipeline that says anything about the sandbox (here or in `defaults`) has made its choice.
    if (resolved.backend !== 'claude-cli' || !stageMayUseBash(resolved) || resolved.sandbox !== undefined) return;
    this.noteAt(
      [list, i, stage.allowedTools ? 'allowedTools' : 'id'],
      "Bash runs in Claude Code's sandbox with no network but the model API; list the hosts it needs, e.g. `sandbox: { allowedDomains: [github.com, registry.npmjs.org] }`",
    );
  }

  private async checkSystemPrompt(systemPrompt: string): Promise<void> {
    try {
      const { text: template } = await loadSystemPrompt(this.baseDir, systemPrompt, '(pipeline)');
      const known = (v: string): boolean => v === STAGE_PROMPT_VARIABLE || v === OUTPUT_CONTRACT_VARIABLE || v === 'stage.id' || this.isRunVariable(v);
      this.problems.push(...unknownVariables(template, path.resolve(this.baseDir, systemPrompt), known).map((p) => ({ ...p, field: `systemPrompt ${p.field}` })));
    } catch (err) {
      this.problemAt(['systemPrompt'], (err as Error).message);
    }
  }

  /** The prompt exists (file or step name) and uses known variables; a passthrough template only gets notes for other names. */
  private async checkStagePrompt(list: StageList, i: number, stage: StageDefinition, prompt: string, known: (v: string) => boolean): Promise<void> {
    const passthrough = (stage.templateSyntax ?? this.pipeline.templateSyntax) === 'passthrough';
    const report = (found: PipelineProblemReport[]): void => {
      for (const p of found) {
        const name = p.field.slice(p.field.indexOf('{{') + 2, p.field.lastIndexOf('}}'));
        if (passthrough && !isReservedVariable(name)) this.notes.push({ ...p, message: 'passed to the agent as written (templateSyntax: passthrough)' });
        else this.problems.push(p);
      }
    };
    const source = resolvePromptSource(this.baseDir, prompt, this.pipeline.promptsDir);
    if (source.kind !== 'inline' && !this.checkFiles) return;
    if (source.kind === 'missing') this.problemAt([list, i, 'prompt'], missingPromptMessage(prompt, source.tried));
    else if (source.kind === 'file') {
      const promptFile = path.resolve(this.baseDir, source.relative);
      // As the worker reads it: a regular file under the cap, never a FIFO whose open would wait for a writer.
      const template = await readRegularFile(promptFile, { follow: true, maxBytes: MAX_PIPELINE_FILE_BYTES }).then((data) => data.toString('utf8'), (err: unknown) => err);
      if (typeof template !== 'string') this.problemAt([list, i, 'prompt'], unreadablePromptMessage(promptFile, template));
      else report(unknownVariables(template, promptFile, known).map((p) => ({ ...p, field: `${list}[${i}].prompt ${p.field}` })));
    } else {
      // Inline template: its lines count from where the text starts in the pipeline file.
      const first = this.locator.textLine([list, i, 'prompt']);
      report(unknownVariables(prompt, this.file, known).map((p) => this.inlineVariable(p, first && p.line ? first + p.line - 1 : first, `${list}[${i}].prompt`)));
    }
  }

  private checkStageOutput(list: StageList, i: number, output: string): void {
    const line = this.locator.line([list, i, 'output']);
    this.problems.push(...unknownVariables(output, this.file, (v) => v === 'stage.id' || this.isRunVariable(v)).map((p) => this.inlineVariable(p, line, `${list}[${i}].output`)));
  }

  private isRunVariable(v: string): boolean {
    return v === 'run.id' || v === 'run.pipeline' || v === 'attempt' || (v.startsWith('inputs.') && Object.hasOwn(this.pipeline.inputs ?? {}, v.slice(7)));
  }

  /** An unknown variable of a template written in the pipeline file (`field`), placed on the file's line `line`. */
  private inlineVariable(problem: PipelineProblemReport, line: number | undefined, field: string): PipelineProblemReport {
    return { ...problem, line, column: this.locator.columnOf(line, problem.field.slice(2, -2)), field: `${field} ${problem.field}` };
  }

  /**
   * A problem of a `defaults:` template, reported once at its own line, naming the stages that take it: it was at
   * each such stage's `id`, once per stage, as if the stage had written it.
   */
  private defaultsProblemAt(field: 'commitMessage' | 'appendSystemPrompt', message: string, stageId: string): void {
    const key = `${field}\n${message}`;
    let entry = this.defaultsProblems.get(key);
    if (!entry) {
      entry = { report: this.reportAt(['defaults', field], message), stages: [] };
      this.defaultsProblems.set(key, entry);
      this.problems.push(entry.report);
    }
    entry.stages.push(stageId);
    entry.report.message = `${message} (the default of stage${entry.stages.length > 1 ? 's' : ''} ${entry.stages.join(', ')})`;
  }

  private problemAt(fieldPath: PropertyKey[], message: string): void {
    this.problems.push(this.reportAt(fieldPath, message));
  }

  private noteAt(fieldPath: PropertyKey[], message: string): void {
    this.notes.push(this.reportAt(fieldPath, message));
  }

  /** What a problem or note at the field `fieldPath` of the pipeline file says, placed where the field is. */
  private reportAt(fieldPath: PropertyKey[], message: string): PipelineProblemReport {
    return { file: this.file, ...this.locator.position(fieldPath), field: formatPath(fieldPath), message };
  }
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false;
}

async function isDirectory(dir: string): Promise<boolean> {
  return (await stat(dir).catch(() => undefined))?.isDirectory() ?? false;
}

/** Why a step file cannot be read, as the worker would refuse it. */
function unreadablePromptMessage(file: string, err: unknown): string {
  if (err instanceof RegularFileError && err.code === 'ENOTREG') return `prompt file ${file} is not a regular file (a folder, a device or a FIFO)`;
  if (err instanceof RegularFileError && err.code === 'EFBIG') return `prompt file ${file} is ${err.bytes} bytes, more than the cap of ${MAX_PIPELINE_FILE_BYTES} bytes for a pipeline file`;
  return `prompt file ${file} does not exist`;
}
