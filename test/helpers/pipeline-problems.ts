import { PipelineValidationError } from '../../src/pipeline/errors.js';
import { parsePipeline } from '../../src/pipeline/parse.js';

/**
 * The problems `parsePipeline` finds in `text`, as `path: message` (with `withLine`, `line path: message`), or none
 * when it parses.
 */
export function pipelineProblems(text: string, { withLine = false } = {}): string[] {
  try {
    parsePipeline(text, 'p.yaml');
  } catch (err) {
    if (err instanceof PipelineValidationError) return err.problems.map((p) => `${withLine ? `${p.line ?? '?'} ` : ''}${p.path}: ${p.message}`);
    throw err;
  }
  return [];
}
