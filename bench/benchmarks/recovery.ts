import type { BenchmarkResult } from '../lib/results.js';
import { median, round } from '../lib/stats.js';
import { HEARTBEAT_TIMEOUT_MS, KILL_AT_TURN, TURNS, type KillTrial } from './kill-trials.js';

const SETUP =
  `A one-stage CLI run of ${TURNS} scripted turns (a Glob tool call each, 300 ms model latency), heartbeatTimeout ${HEARTBEAT_TIMEOUT_MS / 1000}s, ` +
  `two worker processes polling; when the agent asks for turn ${KILL_AT_TURN} (0-based: ${KILL_AT_TURN} turns answered), the worker running it gets SIGKILL ` +
  '(its agent dies with it through setpriv --pdeathsig).';

/** Recovery: kill → the stage running again on the other worker. */
export function recoveryResult(trials: KillTrial[]): BenchmarkResult {
  const started = trials.map((t) => t.toRetryStartedMs);
  const firstRequest = trials.map((t) => t.toFirstRequestMs);
  const p50 = round(median(started) / 1000, 2);
  const limitS = HEARTBEAT_TIMEOUT_MS / 1000 + 2;
  return {
    name: 'recovery',
    title: 'Recovery',
    method: `${SETUP} Measured: kill → the retry attempt's ActivityTaskStarted (lastStartedTime of the pending activity), and kill → the new agent's first request at the model server.`,
    repetitions: trials.length,
    headline: `${p50} s to the retry's start (max ${round(Math.max(...started) / 1000, 2)} s), ${round(median(firstRequest) / 1000, 2)} s to its first model request`,
    goal: { text: `≤ heartbeat timeout + 2 s = ${limitS} s`, met: Math.max(...started) / 1000 <= limitS },
    figures: {
      toRetryStartedMsP50: round(median(started)),
      toRetryStartedMsMax: round(Math.max(...started)),
      toFirstRequestMsP50: round(median(firstRequest)),
      toRetryStartedMs: started,
      toFirstRequestMs: firstRequest,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      runsCompleted: trials.filter((t) => t.completed).length,
    },
    notes: [
      'The goal is judged on the slowest trial. The server notices the dead worker only when the heartbeat timeout expires, counted from the last heartbeat it received; ' +
        'the SDK sends heartbeats at most every 0.8 × heartbeatTimeout, so detection takes between 0.2 and 1.0 heartbeat timeouts after the kill, ' +
        'then the retry policy\'s first backoff (initialInterval) passes before the other worker gets the task.',
      `${trials.filter((t) => t.completed).length} of ${trials.length} runs completed after the crash.`,
    ],
    durationS: 0,
  };
}

/** Resume: how many answered turns the retry asks the model for again, with the session kept and deleted. */
export function resumeResult(trials: KillTrial[]): BenchmarkResult {
  const kept = trials.filter((t) => t.resumable);
  const deleted = trials.filter((t) => !t.resumable);
  const repeatedKept = median(kept.map((t) => t.repeatedTurns));
  const repeatedDeleted = median(deleted.map((t) => t.repeatedTurns));
  return {
    name: 'resume',
    title: 'Resume',
    method:
      `${SETUP} Counted: requests after the kill for turns 0–${KILL_AT_TURN - 1}, which had been answered before the kill. ` +
      `"With resume": the session transcript stays in the run's workspace, so the retry can \`claude --resume\` it. "Without": the bench deletes the transcript ` +
      '(`<session id>.jsonl` under the workspaces folder) right after the kill, so the retry must start a fresh session, as it would on a worker that cannot see the workspace.',
    repetitions: trials.length,
    headline: `${repeatedKept} repeated turns with resume, ${repeatedDeleted} without`,
    goal: { text: `0 with resume, ${KILL_AT_TURN} without`, met: repeatedKept === 0 && repeatedDeleted === KILL_AT_TURN },
    figures: {
      repeatedTurnsWithResume: repeatedKept,
      repeatedTurnsWithoutResume: repeatedDeleted,
      trialsWithResume: kept.map((t) => ({ repeatedTurns: t.repeatedTurns, retryTurns: t.retryTurns, completed: t.completed })),
      trialsWithoutResume: deleted.map((t) => ({ repeatedTurns: t.repeatedTurns, retryTurns: t.retryTurns, completed: t.completed })),
    },
    notes: [
      'The scripted server picks the turn from the number of assistant messages in the request, so a resumed conversation continues at turn 5 or later ' +
        '(the CLI may add a synthetic "No response requested." message, which counts).',
    ],
    durationS: 0,
  };
}
