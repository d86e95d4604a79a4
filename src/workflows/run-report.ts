import { formatDuration } from '../pipeline/duration.js';
import type { RunState, StageState } from '../pipeline/run-state.js';
import { agentPipelineCommand } from '../pipeline/shell-words.js';

const usd = (value: number): string => `$${value.toFixed(4)}`;
/** Table cells must not break the markdown row. */
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

function describeState(stage: StageState): string {
  if (stage.status === 'running' && stage.leaseWait) return `waiting for key ${stage.leaseWait.key} (${stage.leaseWait.ahead} ahead)`;
  if (stage.status === 'waiting' && stage.waitingFor) return `waiting (${stage.waitingFor.kind.replace('_', ' ')})`;
  if (stage.status === 'skipped' && stage.skip) return `skipped: ${stage.skip.reason}`;
  if ((stage.status === 'failed' || stage.status === 'cancelled') && stage.error) return `${stage.status}: ${stage.error.type}`;
  return stage.status;
}

function stageRow(s: StageState, now: number): string {
  const elapsed = s.startedAt ? formatDuration((s.finishedAt ?? now) - s.startedAt) : '';
  const cost = s.totals ? usd(s.totals.costUsd) : '';
  return `| ${s.id} | ${cell(describeState(s))} | ${s.round ?? ''} | ${s.totals?.attempts ?? ''} | ${elapsed} | ${cost} |`;
}

/**
 * The report's stage rows as last rendered: the report is rendered whenever the run changes, so rendering every row
 * each time made every activation grow with the run. `takeChanged` names the stages whose rows may show something new
 * since the last render (the tracker records them); those, and the stages that are running or waiting (whose elapsed
 * time moves), are rendered again.
 */
export class StageRows {
  private rows: string[] = [];
  private positions = new Map<string, number>();
  /** Stages started and not finished: their rows show the time elapsed. */
  private readonly live = new Set<string>();

  constructor(private readonly takeChanged: () => Iterable<string>) {}

  linesOf(stages: readonly StageState[], now: number): string[] {
    const changed = this.takeChanged();
    if (this.rows.length !== stages.length) {
      this.positions = new Map(stages.map((s, i) => [s.id, i]));
      this.rows = stages.map((s) => this.render(s, now));
      return this.rows;
    }
    for (const id of new Set([...changed, ...this.live])) {
      const at = this.positions.get(id);
      if (at !== undefined) this.rows[at] = this.render(stages[at], now);
    }
    return this.rows;
  }

  private render(s: StageState, now: number): string {
    if (s.startedAt !== undefined && s.finishedAt === undefined) this.live.add(s.id);
    else this.live.delete(s.id);
    return stageRow(s, now);
  }
}

/**
 * The run as a readable markdown report: what it waits for (with the commands that move it on), then one
 * row per stage. The Web UI shows it as the workflow's current details.
 */
export function renderRunReport(state: RunState, now: number, rows?: StageRows): string {
  const budget = state.budgetUsd !== undefined ? ` of ${usd(state.budgetUsd)} budget` : '';
  const lines = [`**${state.pipeline}** · ${state.status} · cost ${usd(state.costUsd)}${budget}`];
  if (state.error) lines.push('', `**${state.error.type}**: ${cell(state.error.message)}`);
  if (state.leaseWait) lines.push('', `**Waiting** · for key \`${cell(state.leaseWait.key)}\` · ${state.leaseWait.ahead} ahead`);
  for (const stage of state.stages) {
    const waiting = stage.waitingFor;
    if (stage.status !== 'waiting' || !waiting) continue;
    // Blank lines around quotes and lists: the Web UI's markdown renderer needs them.
    lines.push('', `**Waiting** · stage \`${stage.id}\` · ${cell(waiting.message)}`);
    if (waiting.question) lines.push('', `> ${cell(waiting.question)}`);
    lines.push('');
    for (const denial of waiting.denials ?? []) lines.push(`- denied: \`${denial.tool}\` ${cell(JSON.stringify(denial.input).slice(0, 200))}`);
    for (const command of waiting.commands) lines.push(`- \`${command}\``);
  }
  // Narrow enough for the Web UI's details panel; backend and model are in each activity's summary.
  lines.push('', '| stage | state | round | attempts | elapsed | cost |', '| --- | --- | --- | --- | --- | --- |');
  lines.push(...(rows ? rows.linesOf(state.stages, now) : state.stages.map((s) => stageRow(s, now))));
  for (const warning of state.warnings ?? []) lines.push('', `⚠ ${cell(warning)}`);
  // Last, as the Web UI (2.42) sizes its details frame a line short: losing this hint costs nothing.
  lines.push('', `More: \`${agentPipelineCommand('status', state.runId)}\``);
  return lines.join('\n');
}
