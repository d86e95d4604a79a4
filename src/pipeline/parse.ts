import { isNode, LineCounter, parseDocument, type Document } from 'yaml';
import { findGraphProblems } from './graph.js';
import { formatPath, PipelineValidationError, type PipelineProblem } from './errors.js';
import { describeIssues } from './issue-messages.js';
import { pipelineSchema, type PipelineDefinition } from './schema.js';
import { findSemanticProblems } from './semantic-checks.js';

/**
 * Parses and validates a pipeline file's text. Pure (no file access) so the client, the worker and
 * tests share it; `file` is only used in messages.
 * @throws PipelineValidationError naming every problem with its line and YAML path.
 */
export function parsePipeline(text: string, file: string): PipelineDefinition {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new PipelineValidationError(
      file,
      doc.errors.map((e) => ({ path: '', line: lineCounter.linePos(e.pos[0]).line, message: e.message })),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS();
  } catch (err) {
    // The yaml library refuses to expand an alias bomb ("billion laughs") and says so by throwing.
    throw new PipelineValidationError(file, [{ path: '', message: `the YAML cannot be read: ${(err as Error).message}` }]);
  }
  if (data === null || data === undefined) {
    throw new PipelineValidationError(file, [{ path: '', message: 'the file is empty; a pipeline needs at least `name` and `stages`' }]);
  }
  const parsed = pipelineSchema.safeParse(data, { reportInput: true });
  if (!parsed.success) {
    throw new PipelineValidationError(
      file,
      describeIssues(pipelineSchema, parsed.error.issues).map((issue) => locate(doc, lineCounter, issue.path, issue.message)),
    );
  }
  // Semantic checks walk the stage graph, so they run only once it is sound.
  const graphProblems = findGraphProblems(parsed.data.stages);
  const problems = graphProblems.length > 0 ? graphProblems : findSemanticProblems(parsed.data);
  if (problems.length > 0) {
    throw new PipelineValidationError(
      file,
      problems.map((p) => locate(doc, lineCounter, p.path, p.message)),
    );
  }
  return parsed.data;
}

function locate(doc: Document, lineCounter: LineCounter, path: readonly PropertyKey[], message: string): PipelineProblem {
  // Walk up until a node exists: a missing field has no node, but its parent object does.
  for (let depth = path.length; depth >= 0; depth--) {
    const node = depth === 0 ? doc.contents : doc.getIn(path.slice(0, depth) as unknown[], true);
    if (isNode(node) && node.range) {
      return { path: formatPath(path), line: lineCounter.linePos(node.range[0]).line, message };
    }
  }
  return { path: formatPath(path), message };
}
