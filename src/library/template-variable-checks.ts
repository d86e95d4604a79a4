import type { PipelineDefinition } from '../pipeline/schema.js';
import { CONTEXT_VARIABLE, listTemplateVariables, RUN_DELIVERY_VARIABLES } from '../pipeline/template.js';
import type { PipelineProblemReport } from './errors.js';

/*
 * Which `{{variables}}` a template of the pipeline may use where it is filled, and the problem reported for one it
 * may not, with a hint at what it may use instead. Part of validatePipeline (pipeline-checks.ts applies them).
 */

/** True for a variable a stage's prompt may use: inputs, run fields, attempt, and results of stages it runs after. */
export function isStageVariable(v: string, pipeline: PipelineDefinition, ancestors: ReadonlySet<string>): boolean {
  if (['run.id', 'run.pipeline', 'attempt', 'previous.failed', 'stage.id'].includes(v)) return true;
  if (pipeline.workspace?.repo !== undefined && ['workspace.diff', 'workspace.branch', 'workspace.base'].includes(v)) return true;
  if (v === CONTEXT_VARIABLE && (pipeline.context?.length ?? 0) > 0) return true;
  const [kind, name, field, ...rest] = v.split('.');
  if (kind === 'inputs') {
    if (!Object.hasOwn(pipeline.inputs ?? {}, name)) return false;
    // `{{inputs.NAME.KEY}}` reads one key of an object input; which keys it has is known only when the run starts.
    return field === undefined || (pipeline.inputs?.[name].type === 'object' && rest.length === 0);
  }
  if (kind === 'stages') {
    if (!ancestors.has(name)) return false;
    return ['summary', 'artifacts', 'status', 'error', 'answer'].includes(field) ? rest.length === 0 : (field === 'outputs' || field === 'report') && rest.length > 0;
  }
  return false;
}

/** What only `finally` stages can read: how the run ended, and how its delivery went. */
export function isRunEndVariable(v: string): boolean {
  return v === 'run.status' || v === 'run.error' || v === 'run.error.type' || v === 'run.error.message' || RUN_DELIVERY_VARIABLES.includes(v);
}

/**
 * Why `{{stages.ID.FIELD}}` is unknown: the stage does not run before this one (then: needs), or it does and has no
 * such field (then: the fields it has).
 */
function stageVariableHint(v: string, known: (v: string) => boolean): string {
  const [, id, ...field] = v.split('.');
  if (!id || !known(`stages.${id}.summary`)) return `the stage does not run after "${id}"; add it to needs`;
  const name = field.join('.');
  const outputs = name && !name.startsWith('outputs.') && !name.startsWith('report.') ? `; a value the agent reports is {{stages.${id}.outputs.${name}}} (in \`outputs\`) or {{stages.${id}.report.${name}}} (a top-level field of its report)` : '';
  return `stage "${id}" runs before this one, but has no field "${name}": its fields are summary, answer, artifacts, status, error, outputs.KEY and report.FIELD${outputs}`;
}

/** Template variables `known` rejects, each located by line and column (of its name) in `file`. */
export function unknownVariables(template: string, file: string, known: (v: string) => boolean): PipelineProblemReport[] {
  const problems: PipelineProblemReport[] = [];
  const lines = template.split('\n');
  for (const v of listTemplateVariables(template)) {
    if (known(v)) continue;
    const line = lines.findIndex((l) => l.includes(v)) + 1;
    const place = line ? { line, column: lines[line - 1].indexOf(v) + 1 } : {};
    const hint = v.startsWith('stages.')
      ? stageVariableHint(v, known)
      : v.startsWith('inputs.')
        ? 'the pipeline declares no such input (add it under inputs:)'
        : 'known: inputs.NAME, stages.ID.summary|answer|artifacts|status|error|outputs.KEY|report.FIELD, run.id, run.pipeline, attempt, previous.failed ' +
          '(run.status, run.error, run.error.type and run.delivery.push|pullRequest|branch|url in `finally` stages); set `templateSyntax: passthrough` to hand other {{names}} to the agent as written';
    problems.push({ file, ...place, field: `{{${v}}}`, message: `unknown template variable: ${hint}` });
  }
  return problems;
}
