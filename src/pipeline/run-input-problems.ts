/*
 * What the workflow says about a run input that fails its check (run-input.ts). Apart from the check itself, which
 * needs zod and the schema: the workflow formats the problems, and its bundle should carry none of that.
 */

/** One thing wrong with a run input: where (`pipeline.stages[0].needs[0]`) and what. */
export interface RunInputProblem {
  path: string;
  message: string;
}

/** The message of a run that fails for its input: every problem, one a line. */
export function formatRunInputProblems(problems: readonly RunInputProblem[]): string {
  return (
    `[PIPELINE_INVALID] the run input is not a valid pipeline run (was it started without \`agent-pipeline start\`? \`agent-pipeline validate FILE\` shows the same checks):\n` +
    problems.map((p) => `  ${p.path || '(input)'}: ${p.message}`).join('\n')
  );
}
