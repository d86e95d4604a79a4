import path from 'node:path';
import { describeOmittedArtifacts } from '../pipeline/output-caps.js';
import { formatDuration } from '../pipeline/duration.js';
import type { LeaseWaitState, RunState, StageState, StageStatus, WaitingFor } from '../pipeline/run-state.js';
import { formatColumns, formatUsd } from './output.js';
import type { LiveAttempt, RunSnapshot } from '../library/run-reader.js';

/** How each stage state is drawn, so a glance at the left column tells the story. */
export const STAGE_ICON: Record<StageStatus, string> = {
  pending: '·',
  running: '▶',
  waiting: '⏸',
  completed: '✔',
  failed: '✘',
  skipped: '-',
  cancelled: '■',
};

/** A stage that waits for a person, with the commands that move it on. */
export interface StageWait extends WaitingFor {
  stage: string;
}

/** Every wait of the run, with the commands that move it on (the workflow writes them). */
export function listWaits(state: RunState): StageWait[] {
  return state.stages
    .filter((s): s is StageState & { waitingFor: WaitingFor } => s.waitingFor !== undefined)
    .map((s) => ({ ...s.waitingFor, stage: s.id }));
}

/** Elapsed time of a stage: to its end, or to `now` while it runs. */
function stageElapsed(stage: StageState, now: number): string {
  if (!stage.startedAt) return '';
  return formatDuration((stage.finishedAt ?? now) - stage.startedAt);
}

/** A stage's cost: so far while it runs, what it spent, or for one a fork took over, what it cost its source (carried). */
export function stageCost(stage: StageState, live: LiveAttempt | undefined): string {
  // The CLI reports cost only when an attempt ends; while it runs, earlier attempts' cost plus `…` says "so far".
  if (stage.status === 'running') {
    const soFar = (stage.totals?.costUsd ?? 0) + (live?.costUsd ?? 0);
    return soFar > 0 ? `${formatUsd(soFar)}…` : live?.turns ? `${live.turns} turns…` : '';
  }
  // A stage a fork took over cost its source run, not this one; one it then ran again (a rework) also cost this run.
  if (stage.carriedCostUsd !== undefined) {
    const carried = `${formatUsd(stage.carriedCostUsd)} carried`;
    return stage.totals ? `${formatUsd(stage.totals.costUsd)} + ${carried}` : carried;
  }
  const cost = stage.totals?.costUsd ?? stage.result?.costUsd;
  return cost === undefined ? '' : formatUsd(cost);
}

/** A completed stage's summary, saying so when a fork took it over from its source rather than ran it. */
export function completedNote(stage: StageState, state: Pick<RunState, 'forkedFrom'>): string {
  const summary = stage.result?.summary ?? '';
  return isTakenOver(stage) && state.forkedFrom ? `taken over from ${state.forkedFrom.runId}: ${summary}` : summary;
}

/** Whether the stage's result is the one a fork took over: it has not run in this run (no attempts of its own). */
function isTakenOver(stage: StageState): boolean {
  return stage.carriedCostUsd !== undefined && stage.totals === undefined;
}

/** One row per stage: icon, id, state, attempt, round, elapsed, cost, and a short note. */
export function stageRows(state: RunState, live: ReadonlyMap<string, LiveAttempt>, now: number): string[][] {
  return state.stages.map((stage) => {
    const attempt = live.get(stage.id)?.attempt ?? stage.attempt;
    const throttled = stage.status === 'running' ? live.get(stage.id)?.throttled : undefined;
    const note =
      isTakenOver(stage) && state.forkedFrom ? completedNote(stage, state) :
      stage.status === 'failed' ? (stage.error?.message ?? stage.result?.error ?? '') :
      stage.status === 'running' && stage.leaseWait ? describeLeaseWait(stage.leaseWait) :
      throttled ? throttledNote(throttled) :
      stage.status === 'running' && live.get(stage.id)?.lastFailure ? `retrying after: ${live.get(stage.id)!.lastFailure}` :
      stage.status === 'completed' ? completedNote(stage, state) : '';
    return [
      // A `finally` stage runs after the run has ended; say so, since it sits after stages that were skipped.
      `${STAGE_ICON[stage.status]} ${stage.id}${stage.finally ? ' (finally)' : ''}`,
      stage.status,
      attempt ? `attempt ${attempt}` : '',
      stage.round && stage.round > 1 ? `round ${stage.round}` : '',
      stageElapsed(stage, now),
      stageCost(stage, live.get(stage.id)),
      note,
    ];
  });
}

const THROTTLE_REASONS: Record<NonNullable<LiveAttempt['throttled']>['reason'], string> = {
  paused: 'paused after a 429',
  requestsPerMinute: 'requestsPerMinute',
  concurrentRequests: 'concurrentRequests',
};

/** A stage waiting, at no cost, for its API key: `throttled: api key 3f2a9c1b0d4e (paused after a 429) until 14:03:05 UTC`. */
export function throttledNote(wait: NonNullable<LiveAttempt['throttled']>): string {
  const until = wait.until ? ` until ${new Date(wait.until).toISOString().slice(11, 19)} UTC` : '';
  const ahead = wait.ahead ? `, ${wait.ahead} ahead` : '';
  return `throttled: api key ${wait.apiKey} (${THROTTLE_REASONS[wait.reason] ?? wait.reason}${ahead})${until}`;
}

/** The run's one-line header: id, pipeline, state, elapsed, cost against budget. */
export function runHeader(state: RunState, now: number): string {
  const elapsed = formatDuration((state.finishedAt ?? now) - state.startedAt);
  const budget = state.budgetUsd ? ` of ${formatUsd(state.budgetUsd)} budget` : '';
  const fork = state.forkedFrom ? ` · forked from ${state.forkedFrom.runId} at ${state.forkedFrom.stage}${state.forkedFrom.forced ? ' (forced)' : ''}, ${formatUsd(state.carriedCostUsd ?? 0)} carried` : '';
  return `Run ${state.runId} · ${state.pipeline} · ${state.status} · ${elapsed} · ${formatUsd(state.costUsd)}${budget}${fork}`;
}

/** A deadline as `2026-11-26 09:44:00 UTC`. */
export function formatDeadline(at: number): string {
  return `${new Date(at).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A wait for a concurrency key in a few words: `waits for key repo:acme (1 ahead, 2 of 2 held)`. */
export function describeLeaseWait(wait: LeaseWaitState): string {
  return `waits for key ${wait.key} (${wait.ahead} ahead, ${wait.holders} of ${wait.limit} held)`;
}

/** What the run waits for and how to move it on, ready to print. */
export function waitLines(state: RunState): string[] {
  const runWait = state.status === 'running' && state.leaseWait ? [`⏳ the run ${describeLeaseWait(state.leaseWait)}; its stages start once it holds the key`] : [];
  return runWait.concat(...listWaits(state).map((wait) => [
    `⏸ ${wait.stage} waits for ${wait.kind.replace('_', ' ')}: ${wait.question ?? wait.message}`,
    ...(wait.denials ?? []).map((d) => `    denied: ${d.tool} ${summariseInput(d.input)}`),
    ...(wait.request ? [`    wants to run: ${wait.request.tool} ${oneLine(wait.request.input, 200)}`, ...(wait.request.reason ? [`    because: ${oneLine(wait.request.reason, 200)}`] : [])] : []),
    ...(wait.questions ?? []).flatMap((q) => (q.options.length > 0 ? [`    suggested answers${wait.questions!.length > 1 ? ` to "${oneLine(q.header ?? q.question, 60)}"` : ''}: ${q.options.map((o) => `"${oneLine(o, 60)}"`).join(', ')}`] : [])),
    // An absolute time: the live view prints these lines again only when they change.
    ...(wait.timeoutAt === undefined ? [] : [`    deadline ${formatDeadline(wait.timeoutAt)}${wait.onTimeout ? `; then ${wait.onTimeout}` : ''}`]),
    ...wait.commands.map((command) => `    → ${command}`),
  ]));
}

/** The live block `start --wait` and `watch` redraw: header, stage table, waits. */
export function progressLines(snapshot: RunSnapshot, now: number): string[] {
  return [runHeader(snapshot.state, now), ...formatColumns(stageRows(snapshot.state, snapshot.live, now)).map((l) => `  ${l}`), ...waitLines(snapshot.state), ...noticeLines(snapshot)];
}

/** Warnings about how trustworthy or current the picture is. */
export function noticeLines(snapshot: RunSnapshot): string[] {
  const lines: string[] = [];
  if (snapshot.executionStatus === 'RUNNING' && !snapshot.workerPolling) {
    // A cancel sent now is kept in the history: the run reads as running until a worker acts on it, so say so.
    const waits = snapshot.cancelRequested ? 'the run is cancelled, and stops, once one starts' : 'the run waits until one starts';
    lines.push(`! no worker is polling task queue "${snapshot.taskQueue}": ${waits} (agent-pipeline worker)`);
  }
  if (snapshot.source === 'history') lines.push('! state rebuilt from the event history (no worker answered); waits for a person are not shown');
  // A run refused before any stage started (RUN_NOT_TRUSTED): no stage row says why, so the run's own error does.
  const { error, stages } = snapshot.state;
  if (error && stages.every((s) => s.status === 'pending' || s.status === 'skipped')) lines.push(`✘ ${error.message.startsWith(`[${error.type}]`) ? '' : `[${error.type}] `}${error.message}`);
  return lines;
}

/** What follows the stage table once a run is described in full: workspace, artifacts with paths, warnings, link. */
export function closingLines(state: RunState, webUi: string | undefined): string[] {
  const lines: string[] = [];
  if (state.workspace) lines.push(`Workspace: ${state.workspace}`);
  const artifacts = state.stages.flatMap((s) => (s.result?.artifacts ?? []).map((a) => ({ stage: s.id, ...a })));
  const omitted = state.stages.flatMap((s) => (s.result?.artifactsOmitted ? [{ stage: s.id, omitted: s.result.artifactsOmitted }] : []));
  if (artifacts.length || omitted.length) {
    lines.push('Artifacts:');
    const rows = artifacts.map((a) => [`  ${a.stage}`, state.workspace ? path.join(state.workspace, a.path) : a.path, `${a.bytes} bytes`]);
    lines.push(...formatColumns(rows));
    // A stage that changed more files than a result lists: the rest, counted by top folder (below the table, so a
    // long line does not widen its columns).
    lines.push(...omitted.map(({ stage, omitted: o }) => `  ${stage}  … and ${describeOmittedArtifacts(o)}`));
  }
  for (const warning of [...(state.warnings ?? []), ...state.stages.flatMap((s) => s.result?.warnings.map((w) => `${s.id}: ${w}`) ?? [])]) {
    lines.push(`! ${warning}`);
  }
  if (webUi) lines.push(`Web UI: ${webUi}`);
  return lines;
}

/** Everything `status` prints: the stage table, waits, artifacts, warnings and the Web UI link. */
export function statusLines(snapshot: RunSnapshot, webUi: string | undefined, now: number): string[] {
  const files = snapshot.bundle
    ? `Files: ${snapshot.bundle.files} carried in the run, bundle ${snapshot.bundle.hash.slice(0, 12)}`
    : 'Files: read by the worker from the pipeline folder';
  return [...progressLines(snapshot, now), ...closingLines(snapshot.state, webUi), files];
}

/** A tool input in one short line: the command, path or pattern if there is one, else compact JSON. */
export function summariseInput(input: unknown, width = 100): string {
  if (input && typeof input === 'object') {
    const fields = input as Record<string, unknown>;
    for (const key of ['command', 'file_path', 'path', 'pattern', 'url', 'query', 'description']) {
      if (typeof fields[key] === 'string') return oneLine(fields[key] as string, width);
    }
  }
  return oneLine(JSON.stringify(input) ?? '', width);
}

/** Collapses whitespace and shortens to `width` characters. */
export function oneLine(text: string, width: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
}
