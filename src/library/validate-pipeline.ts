import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { extraBackendNames, sandboxAllowLocalFromEnv } from '../config.js';
import { formatPath, formatProblemLine, PipelineValidationError, sortByPosition } from '../pipeline/errors.js';
import { inspectPipeline } from '../pipeline/parse.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { StageDefinition } from '../pipeline/stage-schema.js';
import { PipelineInvalidError, toProblemReport, type PipelineProblemReport } from './errors.js';
import { PipelineChecks, type StageList } from './pipeline-checks.js';
import { definitionName, definitionYaml, type PipelineSource } from './pipeline-definition.js';
import { describeUnreadable } from './load-pipeline.js';

/** What {@link validatePipeline} found. The pipeline is valid when `problems` is empty. */
export interface ValidationReport {
  /** The pipeline file, or `<definition NAME>` for an in-memory definition. */
  file: string;
  /** The parsed pipeline, when it parses (even with problems in the files it names). */
  pipeline?: PipelineDefinition;
  problems: PipelineProblemReport[];
  /** Worth knowing, not wrong: `{{names}}` a passthrough template hands to the agent as written, optional files that are absent. */
  notes: PipelineProblemReport[];
}

export interface ValidateOptions {
  /** Folder that agent, prompt and context paths of an in-memory definition resolve against. A file's own folder is used for a path. @default `process.cwd()` */
  baseDir?: string;
  /** Backend names the workers were given besides the built-in ones (added to `AGENT_PIPELINE_BACKENDS`). */
  backends?: readonly string[];
  /**
   * Check the files the pipeline names (agent, prompt, context, system prompt files, folders). `false` checks only
   * the pipeline itself and its inline templates, for files that only the workers' host has. @default true
   */
  checkFiles?: boolean;
  /**
   * Accept loopback and link-local hosts (`localhost`, `127.0.0.1`, `169.254.169.254`) in `sandbox.allowedDomains`, as
   * workers with `AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1` do. @default that variable of this process's environment
   */
  allowLocalHosts?: boolean;
}

/**
 * Checks a pipeline (file or definition) the way a run would use it, without starting anything: the schema and stage
 * graph, that agent, prompt, context and system prompt files exist and parse, and that every template variable is one
 * the stage will have (declared inputs, stages it runs after, run and attempt fields). The same checks and problems as
 * `agent-pipeline validate`; needs no Temporal server.
 */
export async function validatePipeline(source: PipelineSource<string>, options: ValidateOptions = {}): Promise<ValidationReport> {
  if (typeof source === 'string') return validatePipelineFile(source, options);
  const file = definitionName(source);
  const baseDir = path.resolve(options.baseDir ?? process.cwd());
  const report = await checkPipelineText(() => definitionYaml(source, file), file, baseDir, options);
  // Lines would count in YAML the caller never wrote; those in prompt files it names stay.
  const unlocated = (p: PipelineProblemReport): PipelineProblemReport => (p.file === file ? { file: p.file, field: p.field, message: p.message } : p);
  return { ...report, problems: report.problems.map(unlocated), notes: report.notes.map(unlocated) };
}

/** {@link validatePipeline} for a pipeline file; paths in it resolve against its folder. */
export async function validatePipelineFile(file: string, options: Pick<ValidateOptions, 'backends' | 'checkFiles' | 'allowLocalHosts'> = {}): Promise<ValidationReport> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { file, problems: [{ file, field: '', message: `cannot read the pipeline file: ${describeUnreadable(err)}` }], notes: [] };
  }
  return checkPipelineText(() => text, file, path.dirname(path.resolve(file)), options);
}

/**
 * Parses the pipeline, then checks what it names: every problem in one pass, also of a pipeline that fails the schema
 * (its other parts are still checked; a check a schema error made impossible is skipped for that field or stage).
 * `readText` throws PipelineValidationError for text it cannot give.
 */
async function checkPipelineText(readText: () => string, file: string, baseDir: string, options: ValidateOptions): Promise<ValidationReport> {
  let text: string;
  try {
    text = readText();
  } catch (err) {
    if (!(err instanceof PipelineValidationError)) throw err;
    return { file, problems: PipelineInvalidError.from(err).problems, notes: [] };
  }
  const inspection = inspectPipeline(text, file, { backends: [...(options.backends ?? []), ...extraBackendNames()] });
  const found = inspection.problems.map((p) => toProblemReport(file, p));
  const { pipeline } = inspection;
  if (!pipeline) return { file, problems: found, notes: [] };
  const checks = new PipelineChecks(pipeline, file, baseDir, text, options.checkFiles ?? true);
  if (options.checkFiles ?? true) await checks.checkPipelineFiles();
  checks.checkRunTemplates();
  const allowLocal = options.allowLocalHosts ?? sandboxAllowLocalFromEnv();
  checks.checkMcpServers(allowLocal);
  checks.checkSandboxHosts(allowLocal);
  for (const [list, i, stage] of listStages(pipeline)) await checks.checkStage(list, i, stage);
  const skipped = inspection.skipped.map(formatPath);
  const inside = (field: string, scope: string): boolean => field.startsWith(scope) && (field.length === scope.length || /^[.[ ]/.test(field.slice(scope.length)));
  // A field the schema already refused (a path that leaves its folder) is not reported again by the checks after it.
  const refused = found.map((p) => p.field).filter((field) => field !== '');
  const kept = (p: PipelineProblemReport): boolean => ![...skipped, ...refused].some((scope) => inside(p.field, scope));
  // The pipeline is reported when it parses as written, even with problems in the files it names.
  return { file, ...(found.length === 0 ? { pipeline } : {}), problems: inFileOrder(file, [...found, ...checks.problems.filter(kept)]), notes: inFileOrder(file, checks.notes.filter(kept)) };
}

/**
 * Problems in the order of their files, whichever check found them: the pipeline file's first, then each file it names
 * in the order the checks came to it; within a file by line, then column.
 */
function inFileOrder(file: string, reports: readonly PipelineProblemReport[]): PipelineProblemReport[] {
  const files = [...new Set([file, ...reports.map((r) => r.file)])];
  return sortByPosition(reports).sort((a, b) => files.indexOf(a.file) - files.indexOf(b.file));
}

function listStages(pipeline: PipelineDefinition): [StageList, number, StageDefinition][] {
  return [
    ...pipeline.stages.map((s, i): [StageList, number, StageDefinition] => ['stages', i, s]),
    ...(pipeline.finally ?? []).map((s, i): [StageList, number, StageDefinition] => ['finally', i, s]),
  ];
}

/**
 * Throws when `report` lists problems, with every one of them: what `start` does before a run begins, so it refuses
 * what `validate` would. @throws PipelineInvalidError
 */
export function assertValid(report: ValidationReport): void {
  if (report.problems.length === 0) return;
  const lines = report.problems.map((p) => `  ${formatProblemLine(p)}`);
  const count = `${report.problems.length} problem${report.problems.length === 1 ? '' : 's'}`;
  throw new PipelineInvalidError(
    report.file,
    report.problems,
    `[PIPELINE_INVALID] ${report.file} is not a valid pipeline (${count}; \`agent-pipeline validate\` lists the same):\n${lines.join('\n')}`,
  );
}
