import { capText, findOversizedField, formatSize, OUTPUT_CAPS } from '../../pipeline/output-caps.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import type { StageResult } from '../../pipeline/stage-result.js';
import { renderTemplate, type TemplateContext } from '../../pipeline/template.js';
import type { BackendOutcome } from '../backends/stage-backend.js';
import { stageFailure } from '../failures.js';
import { checkReportedPaths } from '../outputs/reported-paths.js';
import { withTemplateErrors } from '../prompt/stage-prompt.js';
import type { AttemptRecord } from './attempt-setup.js';

/*
 * What a command stage's attempt does around the command (backends/command/): its `env:` values filled from the run
 * before it starts, and its stage result made from its stdout after a successful exit.
 */

/**
 * The stage with its `env:` values rendered (`{{inputs.bead_id}}`): the only way a run's values reach a command, as
 * data in its environment, never as part of its command line.
 * @throws TEMPLATE_VARIABLE_UNKNOWN for a variable the run does not define
 */
export function withRenderedEnv(stage: ResolvedStage, context: TemplateContext): ResolvedStage {
  if (!stage.env) return stage;
  const env = withTemplateErrors(stage.id, () =>
    Object.fromEntries(Object.entries(stage.env!).map(([name, value]) => [name, renderTemplate(value, context, `stage ${stage.id} env.${name}`, { 'stage.id': stage.id })])),
  );
  return { ...stage, env };
}

/**
 * The result of a command that exited with 0: its stdout (the end of it, capped) is the answer, its last line the
 * summary, and with `outputs: json` that last line, a JSON object, the outputs.
 * @throws OUTPUT_CONTRACT_VIOLATION (not retried: the same command prints the same) when `outputs: json` finds no JSON
 * object on the last line; OUTPUT_TOO_LARGE for outputs over their cap
 */
export function readCommandAnswer(stage: ResolvedStage, outcome: BackendOutcome, record: AttemptRecord, workspaceDir: string): StageResult {
  const lines = outcome.text.trimEnd().split('\n');
  const last = lines.at(-1) ?? '';
  const outputs = stage.outputs === 'json' ? parseOutputsLine(stage.id, last) : {};
  const oversized = findOversizedField({ outputs });
  if (oversized) {
    throw stageFailure({ type: 'OUTPUT_TOO_LARGE', stageId: stage.id, message: `the command's \`${oversized.field}\` is ${formatSize(oversized.bytes)}, over its limit of ${formatSize(oversized.limit)}`, details: { transcript: record.transcript } });
  }
  const checked = checkReportedPaths(workspaceDir, outputs);
  const warnings = [...record.warnings, ...checked.warnings];
  const summaryLine = (stage.outputs === 'json' ? lines.slice(0, -1) : lines).filter((line) => line.trim() !== '').at(-1);
  const answer = capText(outcome.text.trimEnd(), OUTPUT_CAPS.answerBytes);
  // The backend hands over only stdout's end, so its whole size is unknown here: say what is known.
  if (answer.cut) warnings.push(`the command's stdout was over the answer's limit of ${formatSize(OUTPUT_CAPS.answerBytes)}; its end was kept (the transcript keeps its first ${formatSize(OUTPUT_CAPS.commandTranscriptBytes)}: \`agent-pipeline logs\`)`);
  return {
    ...record,
    status: 'completed',
    summary: capText(summaryLine?.trim() || 'the command exited with code 0').text,
    outputs: checked.outputs,
    answer: answer.text,
    warnings,
  };
}

/** The `outputs` a command printed as the last line of its stdout. @throws OUTPUT_CONTRACT_VIOLATION, not retried */
function parseOutputsLine(stageId: string, line: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    value = undefined;
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  throw stageFailure({
    type: 'OUTPUT_CONTRACT_VIOLATION',
    stageId,
    message: `the stage says \`outputs: json\`, and the last line of the command's stdout is not a JSON object: ${JSON.stringify(line.slice(0, 200))}`,
    hint: 'make the command print its outputs as one JSON object on its last line (e.g. `echo "{\\"passed\\": true}"`), or remove `outputs: json`',
    nonRetryable: true,
  });
}
