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

/** Thrown when a pipeline file cannot be used; the message lists every problem with file, line and field. */
export class PipelineValidationError extends Error {
  override readonly name = 'PipelineValidationError';
  constructor(
    readonly file: string,
    readonly problems: PipelineProblem[],
  ) {
    super(
      `[PIPELINE_INVALID] ${file} is not a valid pipeline:\n` +
        problems.map((p) => `  ${file}${p.line ? `:${p.line}` : ''} ${p.path || '(document)'}: ${p.message}`).join('\n'),
    );
  }
}

/** Formats a zod/YAML path (`['stages', 2, 'needs']`) the way a reader of the file thinks of it. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? String(part) : `.${String(part)}`))
    .join('');
}
