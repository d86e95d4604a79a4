import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkflowHandle } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time.js';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import { reportText } from '../lib/fixtures.js';
import { isAgentProcess, processTree } from '../lib/proc.js';
import type { BenchStack } from '../lib/stack.js';
import type { WorkerProcess } from '../lib/worker-process.js';

/*
 * The crash experiments behind the recovery and resume benchmarks: a one-stage CLI run of 10 scripted turns,
 * two worker processes polling, and the worker running the stage SIGKILLed when the agent asks for turn 5.
 */

export const TURNS = 10;
export const KILL_AT_TURN = 5;
/** The stage's heartbeat timeout in these runs (production default: 2m). @unit milliseconds */
export const HEARTBEAT_TIMEOUT_MS = 10_000;
/** Each scripted answer waits this long, so the stage is mid-flight for several seconds. @unit milliseconds */
const TURN_DELAY_MS = 300;
const MARKER = 'bench-resume-task';
/** temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED (@temporalio/proto is not a direct dependency). */
const PENDING_ACTIVITY_STATE_STARTED = 2;
const RULE = 'ten-turns';

/** One crash experiment. */
export interface KillTrial {
  /** Whether the killed attempt's Claude session was left in place (`false`: deleted right after the kill). */
  resumable: boolean;
  /** Kill → the retry attempt's ActivityTaskStarted (the pending activity's lastStartedTime). @unit milliseconds */
  toRetryStartedMs: number;
  /** Kill → the retry's agent's first request at the model server. @unit milliseconds */
  toFirstRequestMs: number;
  /** Requests after the kill for turns answered before it (turn index < 5). */
  repeatedTurns: number;
  /** Turn indices the retry asked for, in order. */
  retryTurns: number[];
  completed: boolean;
}

function ruleRequests(stack: BenchStack): RecordedRequest[] {
  return stack.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.rule === RULE);
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** The retry attempt's start time, from the pending activity, once attempt 2 has started. */
async function retryStartedAt(handle: WorkflowHandle): Promise<number | undefined> {
  const { raw } = await handle.describe();
  const pending = raw.pendingActivities?.[0];
  // While attempt 2 waits out its backoff it is SCHEDULED, and lastStartedTime still holds attempt 1's start.
  if (!pending || (pending.attempt ?? 1) < 2 || pending.state !== PENDING_ACTIVITY_STATE_STARTED || !pending.lastStartedTime) return undefined;
  return tsToMs(pending.lastStartedTime);
}

/** Deletes every transcript of `sessionId` under `root`, so the retry cannot resume it. */
async function deleteSession(root: string, sessionId: string): Promise<number> {
  const files = (await readdir(root, { recursive: true })).filter((f) => path.basename(f) === `${sessionId}.jsonl`);
  await Promise.all(files.map((f) => rm(path.join(root, f), { force: true })));
  return files.length;
}

/** Runs the trials: `resumable` ones, then ones whose session is deleted after the kill. */
export async function runKillTrials(stack: BenchStack, resumable: number, fresh: number, log: (line: string) => void): Promise<KillTrial[]> {
  const queue = stack.uniqueName('recovery');
  const workspaces = await stack.folder('workspaces');
  const workers: WorkerProcess[] = [await stack.startWorker(queue, workspaces), await stack.startWorker(queue, workspaces)];
  const turns = Array.from({ length: TURNS }, (_, i) =>
    i < TURNS - 1
      ? { text: `Step ${i + 1}.`, tool: { name: 'Glob', input: { pattern: '*.md' } }, delayMs: TURN_DELAY_MS }
      : { text: reportText('Took ten steps.'), delayMs: TURN_DELAY_MS },
  );
  // repeatLastTurn: a resumed conversation may count an extra synthetic assistant message.
  stack.useScenario({ rules: [{ name: RULE, match: MARKER, turns, repeatLastTurn: true }] });
  const file = await stack.writePipeline({
    name: 'bench-recovery',
    defaults: { heartbeatTimeout: `${HEARTBEAT_TIMEOUT_MS / 1000}s`, retries: 3, allowedTools: ['Glob'] },
    stages: [{ id: 'steps', prompt: `${MARKER}: take ten steps.` }],
  });

  const trials: KillTrial[] = [];
  for (const keepSession of [...Array<boolean>(resumable).fill(true), ...Array<boolean>(fresh).fill(false)]) {
    stack.modelServer.reset();
    const handle = await stack.startPipeline(file, queue);
    await waitFor(`the agent to ask for turn ${KILL_AT_TURN}`, 60_000, () => (ruleRequests(stack).some((r) => r.turn === KILL_AT_TURN) ? true : undefined));
    const victim = workers.find((w) => processTree(w.pid).some(isAgentProcess));
    if (!victim) throw new Error('no worker runs the agent process at the kill point');
    const agents = processTree(victim.pid).filter(isAgentProcess);
    const killedAt = Date.now();
    process.kill(victim.pid, 'SIGKILL');
    const sessionId = ruleRequests(stack).at(-1)?.headers['x-claude-code-session-id'];
    if (!keepSession) {
      // The orphaned agent gets SIGTERM and may still write its session as it stops: delete it once the agent is gone.
      await waitFor('the killed worker\'s agent to exit', 30_000, () => (agents.every((pid) => !existsSync(`/proc/${pid}`)) ? true : undefined));
      if (!sessionId || (await deleteSession(workspaces, sessionId)) === 0) throw new Error(`could not find the transcript of session ${sessionId} to delete`);
    }
    const startedAt = await waitFor('the retry attempt to start', HEARTBEAT_TIMEOUT_MS + 60_000, () => retryStartedAt(handle));
    const firstRequest = await waitFor('the retry agent\'s first request', 60_000, () => ruleRequests(stack).find((r) => Date.parse(r.time) > killedAt));
    const completed = await stack.finish(handle);
    const retryTurns = ruleRequests(stack).filter((r) => Date.parse(r.time) > killedAt).map((r) => r.turn ?? -1);
    trials.push({
      resumable: keepSession,
      toRetryStartedMs: startedAt - killedAt,
      toFirstRequestMs: Date.parse(firstRequest.time) - killedAt,
      repeatedTurns: retryTurns.filter((t) => t < KILL_AT_TURN).length,
      retryTurns,
      completed,
    });
    log(`recovery trial (${keepSession ? 'session kept' : 'session deleted'}): retry started after ${startedAt - killedAt} ms, turns asked again: ${retryTurns.join(',')}`);
    await victim.exited;
    workers.splice(workers.indexOf(victim), 1, await stack.startWorker(queue, workspaces));
  }
  await Promise.all(workers.map((w) => w.stop()));
  return trials;
}
