import type { RunState, RunStatus, StageState, WaitingFor } from '../pipeline/run-state.js';
import type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
import type { AgentActivity } from '../activities/backends/agent-activity.js';
import type { LiveAttempt } from './run-reader.js';

/** Fields every event carries. */
interface EventBase {
  runId: string;
  /** The run's state when the event was seen. */
  state: RunState;
}

/** What happened in a run, as `run.events()` yields it. */
export type RunEvent =
  | (EventBase & { type: 'stage_started'; stage: string; attempt: number; round: number })
  | (EventBase & { type: 'stage_completed'; stage: string; result?: StageResult })
  | (EventBase & { type: 'stage_failed'; stage: string; error?: { type: string; message: string } })
  | (EventBase & { type: 'stage_waiting'; stage: string; waitingFor: WaitingFor })
  | (EventBase & { type: 'stage_skipped'; stage: string; reason?: string })
  | (EventBase & { type: 'stage_cancelled'; stage: string })
  | (EventBase & { type: 'stage_progress'; stage: string; attempt: number; progress: StageProgress })
  | (EventBase & { type: 'run_ended'; status: RunStatus });

/**
 * What a running stage's agent has done so far, from its attempt's last heartbeat: a frontend can stream the stage
 * as it works. Heartbeats are not written to the run's history, so following a stage costs the run nothing.
 */
export interface StageProgress {
  /** The end of the agent's latest text, and its latest tool call with the input summarised. */
  agent?: AgentActivity;
  /** Tokens of the stage so far (earlier attempts included). */
  usage?: TokenUsage;
  /** Cost of the stage so far, earlier attempts included. @unit US dollars */
  costUsd?: number;
  /** Model messages so far in this attempt. */
  turns?: number;
  /** When the agent last produced output. @unit milliseconds since the epoch */
  lastEventAt?: number;
}

/** What was last reported of each running stage's progress, so each change is told once. */
export class StageProgressTracker {
  private readonly seen = new Map<string, string>();

  /** A `stage_progress` event for each running stage whose heartbeat says something new, in stage order. */
  next(state: RunState, live: ReadonlyMap<string, LiveAttempt>): RunEvent[] {
    const events: RunEvent[] = [];
    for (const stage of state.stages) {
      const attempt = live.get(stage.id);
      if (stage.status !== 'running' || !attempt || !hasProgress(attempt)) continue;
      const progress: StageProgress = { agent: attempt.agent, usage: attempt.usage, costUsd: attempt.costUsd, turns: attempt.turns, lastEventAt: attempt.lastEventAt };
      // lastEventAt moves with every stream event (a ping, a thinking delta): alone it is not news to the reader.
      const key = JSON.stringify([attempt.attempt, attempt.agent, attempt.usage, attempt.costUsd, attempt.turns]);
      if (this.seen.get(stage.id) === key) continue;
      this.seen.set(stage.id, key);
      events.push({ runId: state.runId, state, type: 'stage_progress', stage: stage.id, attempt: attempt.attempt, progress });
    }
    return events;
  }
}

/** True when a heartbeat says the agent did something: an attempt's first heartbeat (no turn, no text, no cost) does not. */
function hasProgress(attempt: LiveAttempt): boolean {
  const agent = attempt.agent;
  const tokens = attempt.usage ? Object.values(attempt.usage).some((n) => typeof n === 'number' && n > 0) : false;
  return Boolean(attempt.turns || attempt.costUsd || tokens || agent?.text || agent?.tool || agent?.toolCalls);
}

/** What was last reported for each stage, so each change is told once. */
export class StageEventTracker {
  private readonly seen = new Map<string, string>();

  /** The events that turn the last state seen into `state`, in stage order. */
  next(state: RunState): RunEvent[] {
    const events: RunEvent[] = [];
    for (const stage of state.stages) {
      const key = stageKey(stage);
      if (this.seen.get(stage.id) === key) continue;
      this.seen.set(stage.id, key);
      const event = stageEvent(state, stage);
      if (event) events.push(event);
    }
    return events;
  }
}

/** Changes when the stage does something worth an event: a new status, attempt, round or wait. */
function stageKey(stage: StageState): string {
  return [stage.status, stage.round ?? 1, stage.status === 'running' ? (stage.attempt ?? 1) : '', stage.waitingFor?.since ?? ''].join(':');
}

function stageEvent(state: RunState, stage: StageState): RunEvent | undefined {
  const base = { runId: state.runId, state, stage: stage.id };
  switch (stage.status) {
    case 'running':
      return { ...base, type: 'stage_started', attempt: stage.attempt ?? 1, round: stage.round ?? 1 };
    case 'completed':
      return { ...base, type: 'stage_completed', result: stage.result };
    case 'failed':
      return { ...base, type: 'stage_failed', error: stage.error };
    case 'waiting':
      return stage.waitingFor ? { ...base, type: 'stage_waiting', waitingFor: stage.waitingFor } : undefined;
    case 'skipped':
      return { ...base, type: 'stage_skipped', reason: stage.skip?.reason };
    case 'cancelled':
      return { ...base, type: 'stage_cancelled' };
    default:
      return undefined;
  }
}
