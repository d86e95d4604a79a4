import { LineCounter, parseDocument } from 'yaml';
import { findGraphProblems } from './graph.js';
import { formatPath, PipelineValidationError, sortByPosition, type PipelineProblem } from './errors.js';
import { FieldLocator } from './field-locator.js';
import { describeIssues } from './issue-messages.js';
import { findUnknownBackends } from './backend-names.js';
import { pipelineSchema, type PipelineDefinition } from './schema.js';
import { isInside, salvagePipeline } from './salvage.js';
import { findSemanticProblems } from './semantic-checks.js';

/** Options of {@link parsePipeline}. */
export interface ParseOptions {
  /** Backend names registered with the worker, allowed besides the built-in `claude-cli` and `anthropic-api`. */
  backends?: readonly string[];
}

/** What {@link inspectPipeline} found: every problem of the file, and the pipeline to check further. */
export interface PipelineInspection {
  /**
   * The pipeline, valid when `problems` is empty; else what of it passes the schema with its wrong parts taken out,
   * for the checks that read the files it names. Undefined when too little is usable (YAML errors, no stages list,
   * duplicate stage ids or a dependency cycle).
   */
  pipeline?: PipelineDefinition;
  problems: PipelineProblem[];
  /** Paths whose later checks were skipped: a schema error took out what they would check. */
  skipped: PropertyKey[][];
}

/**
 * Parses and validates a pipeline file's text. Pure (no file access) so the client, the worker and
 * tests share it; `file` is only used in messages.
 * @throws PipelineValidationError naming every problem with its line and YAML path.
 */
export function parsePipeline(text: string, file: string, options: ParseOptions = {}): PipelineDefinition {
  const inspection = inspectPipeline(text, file, options);
  if (inspection.problems.length > 0 || !inspection.pipeline) throw new PipelineValidationError(file, inspection.problems);
  return inspection.pipeline;
}

/**
 * Every problem of a pipeline file's text in one pass: the schema's, then (on what passes it, see salvage.ts) the
 * stage graph's and the checks that need the whole pipeline. Pure.
 */
export function inspectPipeline(text: string, file: string, options: ParseOptions = {}): PipelineInspection {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const locator = new FieldLocator(doc, lineCounter);
  if (doc.errors.length > 0) {
    return { problems: sortByPosition(doc.errors.map((e) => ({ path: '', ...locator.at(e.pos[0]), message: e.message }))), skipped: [] };
  }
  let data: unknown;
  try {
    data = doc.toJS();
  } catch (err) {
    // The yaml library refuses to expand an alias bomb ("billion laughs") and says so by throwing.
    return { problems: [{ path: '', message: `the YAML cannot be read: ${(err as Error).message}` }], skipped: [] };
  }
  if (data === null || data === undefined) {
    return { problems: [{ path: '', message: 'the file is empty; a pipeline needs at least `name` and `stages`' }], skipped: [] };
  }
  // In the order of the file, whichever check found them.
  const located = (found: readonly Located[]): PipelineProblem[] => sortByPosition(found.map((issue) => locate(locator, issue)));
  const parsed = pipelineSchema.safeParse(data, { reportInput: true });
  if (parsed.success) return checkParsed(parsed.data, [], [], options, located);
  const salvage = salvagePipeline(data, parsed.error.issues);
  const schemaProblems = describeIssues(pipelineSchema, [...parsed.error.issues, ...salvage.laterIssues]);
  if (!salvage.pipeline) {
    return { problems: located([...schemaProblems, ...findUnknownBackends(data as PipelineDefinition, options.backends)]), skipped: salvage.skipped };
  }
  return checkParsed(salvage.pipeline, schemaProblems, salvage.skipped, options, located);
}

/** The checks after the schema, on a pipeline that passes it; those inside `skipped` are follow-ons, left out. */
function checkParsed(
  pipeline: PipelineDefinition,
  schemaProblems: Located[],
  skipped: PropertyKey[][],
  options: ParseOptions,
  located: (found: readonly Located[]) => PipelineProblem[],
): PipelineInspection {
  const backends = findUnknownBackends(pipeline, options.backends);
  // Unknown and self `needs` are left out of the graph, so that the checks walking it still run.
  const graphProblems = findGraphProblems(pipeline.stages);
  const sound = dropBadNeeds(pipeline, graphProblems);
  const remaining = findGraphProblems(sound.stages);
  const graph = [...graphProblems, ...remaining.filter((p) => !graphProblems.some((q) => formatPath(q.path) === formatPath(p.path)))];
  // Duplicate ids and cycles leave no graph to walk: the semantic checks wait for them to be fixed.
  const later = [...backends, ...graph, ...(remaining.length > 0 ? [] : findSemanticProblems(sound))].filter((p) => !isInside(p.path, skipped));
  const problems = located([...schemaProblems, ...later]);
  return { pipeline: remaining.length > 0 ? undefined : sound, problems, skipped };
}

/** `pipeline` without the `needs` entries that `graphProblems` name (unknown stages, a stage needing itself). */
function dropBadNeeds(pipeline: PipelineDefinition, graphProblems: readonly { path: PropertyKey[] }[]): PipelineDefinition {
  const bad = new Set(graphProblems.filter((p) => p.path[2] === 'needs' && p.path.length === 4).map((p) => `${String(p.path[1])}/${String(p.path[3])}`));
  if (bad.size === 0) return pipeline;
  return { ...pipeline, stages: pipeline.stages.map((s, i) => (s.needs ? { ...s, needs: s.needs.filter((_, j) => !bad.has(`${i}/${j}`)) } : s)) };
}

/** A problem before it has a line: its path, and for an unknown field the key inside the object at `path`. */
interface Located {
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly key?: string;
}

function locate(locator: FieldLocator, { path, message, key }: Located): PipelineProblem {
  // An unknown field is reported at its own key, not at the object that holds it (which may start lines above).
  const position = (key === undefined ? undefined : locator.keyPosition(path, key)) ?? locator.position(path);
  return { path: formatPath(path), ...position, message };
}
