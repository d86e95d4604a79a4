import { formatDuration } from '../pipeline/duration.js';
import type { RunState, StageState } from '../pipeline/run-state.js';

/** Describes a stage's money and turns in one short phrase. */
function describeCost(stage: StageState): string {
  const r = stage.result;
  if (!r) return '';
  const cost = r.costUsd == null ? 'cost unknown' : `$${r.costUsd.toFixed(4)}`;
  return ` · ${cost} · ${r.numTurns} turn${r.numTurns === 1 ? '' : 's'}`;
}

/**
 * Turns successive run states into log lines: one when a stage starts, one when it ends.
 * Plain appended lines, readable in a terminal and in a CI log alike.
 */
export class ProgressPrinter {
  private readonly seen = new Map<string, string>();

  constructor(private readonly write: (line: string) => void) {}

  update(state: RunState): void {
    for (const stage of state.stages) {
      if (this.seen.get(stage.id) === stage.status) continue;
      this.seen.set(stage.id, stage.status);
      const line = this.describe(stage);
      if (line) this.write(line);
    }
  }

  private describe(stage: StageState): string | undefined {
    const elapsed = stage.startedAt && stage.finishedAt ? ` in ${formatDuration(stage.finishedAt - stage.startedAt)}` : '';
    switch (stage.status) {
      case 'running':
        return `▶ ${stage.id} started (${stage.backend} · ${stage.model})`;
      case 'completed': {
        const files = stage.result?.artifacts.length ? `\n    files: ${stage.result.artifacts.map((a) => a.path).join(', ')}` : '';
        return `✔ ${stage.id} completed${elapsed}${describeCost(stage)}: ${stage.result?.summary ?? ''}${files}`;
      }
      case 'failed':
        return `✘ ${stage.id} failed${elapsed}: ${stage.error?.message ?? ''}`;
      case 'cancelled':
        return `■ ${stage.id} cancelled${elapsed}`;
      case 'skipped':
        return `- ${stage.id} skipped`;
      default:
        return undefined;
    }
  }
}

/** The closing summary of a finished run. */
export function describeRun(state: RunState, link: string | undefined): string[] {
  const lines = [`Run ${state.runId}: ${state.status} · total $${state.costUsd.toFixed(4)}`];
  if (state.workspace) lines.push(`Workspace: ${state.workspace}`);
  const artifacts = state.stages.flatMap((s) => s.result?.artifacts ?? []);
  if (artifacts.length) {
    lines.push('Artifacts:');
    for (const a of artifacts) lines.push(`  ${a.path} (${a.bytes} bytes, sha256 ${a.sha256.slice(0, 12)}…)`);
  }
  if (link) lines.push(`Web UI: ${link}`);
  return lines;
}
