import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { readRun } from '../../src/library/run-reader.js';
import { Worker } from '@temporalio/worker';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { waitFor } from './claude-cli-world.js';
import { startWorkerProcess, waitForRequest, type WorkerProcess } from './fault-helpers.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * One owner per run: three real worker processes on one Temporal queue, the real claude CLI, the scripted model. Every
 * stage of a run goes to the worker that claimed it; SIGKILL that worker mid-stage and the run moves once, to one other
 * worker, which resumes the stage's agent session and finishes the run. Who ran what is read from the run's history:
 * each activity's start event names the worker identity (`pid@host`) that took it.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const quick = (pipeline: string, stage: string): Rule => ({ name: `${pipeline}-${stage}`, match: `Pipeline: ${pipeline} · Stage: ${stage} ·`, turns: [{ text: report(`${stage} done.`) }] });
const RULES: Rule[] = [
  ...['plan', 'left', 'right', 'join', 'ship'].map((stage) => quick('owned', stage)),
  quick('moved', 'first'),
  {
    name: 'moved-slow',
    match: 'Pipeline: moved · Stage: slow ·',
    turns: [
      { text: 'Step one.', tool: { name: 'Bash', input: { command: 'echo one >> log.txt', description: 'Log step one' } } },
      // Streams for about ten seconds: the owner is killed in the middle of it, once its heartbeat carried a cost.
      { text: 'Step two, slowly. '.repeat(40), chunks: 40, chunkDelayMs: 250, tool: { name: 'Bash', input: { command: 'echo two >> log.txt', description: 'Log step two' } } },
      // The new owner resumes the session (the CLI notes the interrupted call): finish what is missing, once.
      { text: 'Checking what is done.', tool: { name: 'Bash', input: { command: 'grep -qx two log.txt || echo two >> log.txt', description: 'Log step two if missing' } } },
      { text: report('Logged both steps.') },
    ],
  },
  quick('moved', 'last'),
];

const PIPELINE = (name: string, stages: string): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, retries: 3, heartbeatTimeout: 5s, permissionMode: dontAsk, allowedTools: [Bash, Read] }\nstages:\n${stages}`;
/**
 * Stages whose agent is not what a test looks at run on the API backend: where a stage runs does not depend on its
 * backend (every stage is a `runStage` activity on the owner's queue), and a model call costs far less than a `claude`.
 */
const API_PIPELINE = (name: string, stages: string): string =>
  `name: ${name}\ndefaults: { backend: anthropic-api, model: haiku, retries: 3, heartbeatTimeout: 5s, maxTokens: 500 }\nstages:\n${stages}`;
const API = '    backend: anthropic-api\n    maxTokens: 500\n';

/** Each activity the run started, in order: its type, the queue it was sent to, the worker that took it, the attempt. */
async function startedActivities(handle: WorkflowHandle): Promise<{ type: string; queue: string; identity: string; attempt: number }[]> {
  const events = (await handle.fetchHistory()).events ?? [];
  const scheduled = new Map(events.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => [String(e.eventId), e.activityTaskScheduledEventAttributes!]));
  return events.flatMap((e) => {
    const started = e.activityTaskStartedEventAttributes;
    const what = scheduled.get(String(started?.scheduledEventId));
    return started ? [{ type: what?.activityType?.name ?? '', queue: what?.taskQueue?.name ?? '', identity: started.identity ?? '', attempt: started.attempt ?? 0 }] : [];
  });
}

describe('one owner per run', () => {
  let harness: Harness;
  const workers: WorkerProcess[] = [];
  beforeAll(async () => {
    harness = await createHarness('run-owner', { scenario: { rules: RULES }, worker: false });
    // The helper's short owner window keeps the test fast: a stage not taken from a gone owner's queue within 3 s, and
    // no answer to the ping within 3 s, moves the run; a live owner answers the ping, so it never moves.
    for (let i = 0; i < 3; i++) workers.push(startWorkerProcess(harness.env));
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.crash()));
    await harness?.close();
  });

  test('a run with a parallel pair on three healthy workers runs every stage on the worker that claimed it', async () => {
    const file = await harness.writePipeline(
      'owned',
      API_PIPELINE(
        'owned',
        [
          '  - id: plan\n    prompt: Plan.\n',
          '  - id: left\n    needs: [plan]\n    prompt: Left.\n',
          '  - id: right\n    needs: [plan]\n    prompt: Right.\n',
          '  - id: join\n    needs: [left, right]\n    prompt: Join.\n',
          '  - id: ship\n    needs: [join]\n    prompt: Ship.\n',
        ].join(''),
      ),
    );
    const handle = await harness.start(file);
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const started = await startedActivities(handle);
    const claims = started.filter((a) => a.type === 'claimRunOwner');
    expect(claims).toHaveLength(1);
    const stages = started.filter((a) => a.type === 'runStage');
    expect(stages).toHaveLength(5);
    // The claim ran on whichever worker polled the shared queue; every stage went to that worker's own queue, so no
    // other worker could take one (on the shared queue any of the three could).
    const queues = new Set(stages.map((s) => s.queue));
    expect(queues.size).toBe(1);
    expect([...queues][0]).toMatch(new RegExp(`^${harness.taskQueue}@owner-`));
    expect(new Set(stages.map((s) => s.identity))).toEqual(new Set([claims[0].identity]));
    expect(started.some((a) => a.type === 'pingRunOwner')).toBe(false);
    // Each stage ran once: one model request each, no attempt redone.
    for (const stage of ['plan', 'left', 'right', 'join', 'ship']) {
      expect(harness.modelServer.requests().filter((r) => r.rule === `owned-${stage}`), stage).toHaveLength(1);
    }
    expect(state.warnings ?? []).not.toContainEqual(expect.stringContaining('moved'));
  });

  test('when the owner is killed mid-stage, the run moves once to another worker, which resumes the session and finishes', async () => {
    const file = await harness.writePipeline('moved', PIPELINE('moved', `  - id: first\n    prompt: First.\n${API}  - id: slow\n    needs: [first]\n    prompt: Log two steps.\n  - id: last\n    needs: [slow]\n    prompt: Last.\n${API}`));
    const handle = await harness.start(file);
    await waitForRequest(harness.modelServer, (r) => r.rule === 'moved-slow' && r.turn === 1, 90_000);
    await waitFor(
      async () => (await readRun(harness.client, handle.workflowId)).live.get('slow'),
      (attempt) => (attempt?.costUsd ?? 0) > 0,
      'a heartbeat with the cost of step one',
      30_000,
    );
    const before = await startedActivities(handle);
    const owner = before.find((a) => a.type === 'claimRunOwner')!.identity;
    const killed = workers.find((w) => owner.startsWith(`${w.pid}@`));
    expect(killed, `owner ${owner} among ${workers.map((w) => w.pid).join(', ')}`).toBeDefined();
    await killed!.crash();

    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('completed');
    const started = await startedActivities(handle);
    const claims = started.filter((a) => a.type === 'claimRunOwner');
    // Moved exactly once, to a live worker other than the dead owner.
    expect(claims).toHaveLength(2);
    const heir = claims[1].identity;
    expect(heir).not.toBe(owner);
    const stages = started.filter((a) => a.type === 'runStage');
    // The killed attempt left no start event: Temporal writes one only for an activity's last attempt, and its retry
    // on the dead owner's queue was never taken (it timed out there, which is what moved the run).
    expect(stages.map((s) => s.identity)).toEqual([owner, heir, heir]);
    // The attempt on the heir counts on from the one that died with the owner, and resumed its session: the model saw
    // step one's turn, and step one never ran again.
    expect(stageOf(state, 'slow').result?.attempt).toBe(2);
    const turns = harness.modelServer.requests().filter((r) => r.rule === 'moved-slow').map((r) => r.turn);
    expect(turns.filter((t) => t === 0)).toHaveLength(1);
    expect(state.warnings).toContainEqual(expect.stringContaining(`the run moved from worker ${owner} to ${heir}`));
    // The move is deterministic: the run's history, ping and second claim included, replays on the workflow code.
    await Worker.runReplayHistory({ workflowBundle: { codePath: WORKFLOW_BUNDLE } }, await handle.fetchHistory(), handle.workflowId);
  });
});
