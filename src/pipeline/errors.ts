/** One problem found in a pipeline file, located by YAML path and, when known, line and column. */
export interface PipelineProblem {
  /** YAML path such as `stages[2].needs[0]`; empty for the whole document. */
  path: string;
  /** @unit 1-based line */
  line?: number;
  /** Where on the line the field (or its nearest parent in the file) starts. @unit 1-based column */
  column?: number;
  message: string;
}

/**
 * `problems` in the order of their file: by line, then column, unlocated ones (the whole document's) first. Stable:
 * problems at one place keep the order the checks found them in.
 */
export function sortByPosition<T extends { line?: number; column?: number }>(problems: readonly T[]): T[] {
  return [...problems].sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
}

/**
 * One problem as a line of a list, as compilers write them: `file:line:column field: message`, the line and column
 * when known (an editor or terminal opens the file there), `(document)` for the whole file.
 */
export function formatProblemLine(problem: { file: string; line?: number; column?: number; field: string; message: string }): string {
  const place = problem.line ? `:${problem.line}${problem.column ? `:${problem.column}` : ''}` : '';
  return `${problem.file}${place} ${problem.field || '(document)'}: ${problem.message}`;
}

/** Thrown when a pipeline file cannot be used; the message lists every problem with file, line, column and field. */
export class PipelineValidationError extends Error {
  override readonly name = 'PipelineValidationError';
  constructor(
    readonly file: string,
    readonly problems: PipelineProblem[],
  ) {
    super(
      `[PIPELINE_INVALID] ${file} is not a valid pipeline:\n` +
        problems.map((p) => `  ${formatProblemLine({ file, line: p.line, column: p.column, field: p.path, message: p.message })}`).join('\n'),
    );
  }
}

/** Formats a zod/YAML path (`['stages', 2, 'needs']`) the way a reader of the file thinks of it. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? String(part) : `.${String(part)}`))
    .join('');
}
