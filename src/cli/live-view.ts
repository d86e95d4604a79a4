import { formatDuration } from '../pipeline/duration.js';
import type { RunSnapshot } from '../library/run-reader.js';
import { terminalSafe } from '../terminal-text.js';
import { truncate } from './output.js';
import { completedNote, noticeLines, progressLines, stageCost, STAGE_ICON, waitLines } from './run-view.js';

/** Where live progress goes; a terminal gets a block redrawn in place, anything else appended lines. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * Draws a run's progress as it changes. On a TTY the whole block (one line per stage, then what the run waits for)
 * is redrawn in place with ANSI cursor moves; otherwise each change is one appended line, readable in a CI log.
 */
export class LiveView {
  private drawnLines = 0;
  private readonly seen = new Map<string, string>();

  constructor(private readonly out: ProgressStream) {}

  render(snapshot: RunSnapshot, now = Date.now()): void {
    if (this.out.isTTY) this.redraw(progressLines(snapshot, now));
    else this.append(snapshot, now);
  }

  private redraw(lines: string[]): void {
    const width = Math.max(20, (this.out.columns ?? 100) - 1);
    // Lines are one row each, cut to the terminal width: a wrapped or broken line would throw off the cursor arithmetic.
    // They quote what the run brought, so no terminal control of theirs gets in among the view's own.
    const block = lines.map((line) => `${truncate(terminalSafe(line).replaceAll('\n', ' '), width)}\x1b[K\n`).join('');
    const up = this.drawnLines > 0 ? `\x1b[${this.drawnLines}F` : '';
    this.out.write(`${up}${block}\x1b[J`);
    this.drawnLines = lines.length;
  }

  private append(snapshot: RunSnapshot, now: number): void {
    const { state } = snapshot;
    for (const stage of state.stages) {
      const live = snapshot.live.get(stage.id);
      const attempt = live?.attempt ?? stage.attempt;
      // Attempt 1 is not shown, so learning it (undefined -> 1) must not print the same line again.
      const key = `${stage.status}|${attempt && attempt > 1 ? attempt : ''}|${stage.round ?? ''}`;
      if (this.seen.get(stage.id) === key || stage.status === 'pending') continue;
      this.seen.set(stage.id, key);
      const details = [
        attempt && attempt > 1 ? `attempt ${attempt}` : '',
        stage.round && stage.round > 1 ? `round ${stage.round}` : '',
        stage.startedAt && stage.finishedAt ? formatDuration(stage.finishedAt - stage.startedAt) : '',
        stageCost(stage, live),
        stage.status === 'failed' ? (stage.error?.message ?? '') : stage.status === 'completed' ? completedNote(stage, state) : '',
        stage.status === 'running' && live?.lastFailure ? `retrying after: ${live.lastFailure}` : '',
      ].filter(Boolean);
      this.line(`${STAGE_ICON[stage.status]} ${stage.id} ${stage.status}${details.length ? ` · ${details.join(' · ')}` : ''}`);
    }
    this.once('waits', waitLines(state));
    this.once('notices', noticeLines(snapshot));
    const open = state.status === 'running' || state.status === 'waiting' || state.status === 'blocked';
    const carried = state.carriedCostUsd !== undefined ? ` · $${state.carriedCostUsd.toFixed(4)} carried` : '';
    this.once('run', open ? [] : [`Run ${state.runId} ${state.status} · ${formatDuration((state.finishedAt ?? now) - state.startedAt)} · $${state.costUsd.toFixed(4)}${carried}`]);
  }

  /** Prints a group of lines when it differs from what was last printed for it. */
  private once(group: string, lines: string[]): void {
    const key = lines.join('\n');
    if (this.seen.get(`#${group}`) === key) return;
    this.seen.set(`#${group}`, key);
    for (const line of lines) this.line(line);
  }

  private line(text: string): void {
    this.out.write(`${terminalSafe(text)}\n`);
  }
}
