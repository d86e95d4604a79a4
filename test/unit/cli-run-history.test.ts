import type { WorkflowExecutionDescription } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { decodeFirst, mapActivitiesToStages, rebuildRunState, timestampMs, withFirstStarts } from '../../src/library/run-history.js';
import { previewFork } from '../../src/library/fork-run.js';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { readHistory } from '../replay/load-history.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';

const T0 = 1_700_000_000;
const payloads = (value: unknown) => ({ payloads: [defaultPayloadConverter.toPayload(value)] });
const at = (seconds: number) => ({ seconds: T0 + seconds, nanos: 0 });

const input: PipelineRunInput = {
  pipeline: { name: 'demo', budgetUsd: 5, defaults: { model: 'opus' }, stages: [{ id: 'spec', prompt: 'a' }, { id: 'build', needs: ['spec'], prompt: 'b' }, { id: 'ship', needs: ['build'], prompt: 'c' }] },
  baseDir: '/p',
  pipelineFile: 'p.yaml',
  inputs: { feature: 'x' },
};
const specResult = { status: 'completed', summary: 'ok', outputs: {}, artifacts: [], usage: { inputTokens: 1, outputTokens: 1 }, costUsd: 0.25, numTurns: 1, durationMs: 5, warnings: [], workspace: '/w/run-1', attempt: 2 } satisfies StageResult;

type History = Parameters<typeof rebuildRunState>[0];

const history: History = {
  events: [
    { eventId: 1, eventTime: at(0), workflowExecutionStartedEventAttributes: { input: payloads(input) } },
    { eventId: 5, eventTime: at(1), activityTaskScheduledEventAttributes: { activityId: '1', input: payloads({ stage: { id: 'spec' }, round: 1 }) } },
    { eventId: 6, eventTime: at(2), activityTaskStartedEventAttributes: { scheduledEventId: 5, attempt: 2 } },
    { eventId: 7, eventTime: at(9), activityTaskCompletedEventAttributes: { scheduledEventId: 5, result: payloads(specResult) } },
    { eventId: 11, eventTime: at(10), activityTaskScheduledEventAttributes: { activityId: '2', input: payloads({ stage: { id: 'build' }, round: 1 }) } },
    { eventId: 12, eventTime: at(11), activityTaskStartedEventAttributes: { scheduledEventId: 11, attempt: 1 } },
    {
      eventId: 13,
      eventTime: at(20),
      activityTaskFailedEventAttributes: { scheduledEventId: 11, failure: { message: 'activity failed', cause: { message: 'the CLI crashed', applicationFailureInfo: { type: 'CLI_CRASHED' } } } },
    },
  ] as unknown as History['events'],
};
const description = (status: string) =>
  ({ workflowId: 'run-1', type: 'pipelineWorkflow', status: { name: status }, startTime: new Date(T0 * 1000), closeTime: status === 'RUNNING' ? undefined : new Date((T0 + 21) * 1000) }) as unknown as WorkflowExecutionDescription;

describe('rebuilding a run from its history', () => {
  test('gives each stage its state, attempt, times, result and failure, as the status query would', () => {
    const state = rebuildRunState(history, description('FAILED'));
    expect(state).toMatchObject({ runId: 'run-1', pipeline: 'demo', status: 'failed', inputs: { feature: 'x' }, costUsd: 0.25, budgetUsd: 5, workspace: '/w/run-1', finishedAt: (T0 + 21) * 1000 });
    expect(state.stages).toEqual([
      { id: 'spec', status: 'completed', backend: 'claude-cli', model: 'opus', round: 1, attempt: 2, startedAt: (T0 + 1) * 1000, finishedAt: (T0 + 9) * 1000, result: specResult },
      { id: 'build', status: 'failed', backend: 'claude-cli', model: 'opus', round: 1, attempt: 1, startedAt: (T0 + 10) * 1000, finishedAt: (T0 + 20) * 1000, error: { type: 'CLI_CRASHED', message: 'the CLI crashed' } },
      { id: 'ship', status: 'skipped', backend: 'claude-cli', model: 'opus' },
    ]);
  });

  test("names an agent's reported failure as the stage's error, as the status query does", () => {
    const reported = { ...specResult, status: 'failed', summary: 'Could not do it.', error: 'the task is impossible', attempt: 1 } satisfies StageResult;
    const events = [
      ...history.events!.slice(0, 3),
      { eventId: 7, eventTime: at(9), activityTaskCompletedEventAttributes: { scheduledEventId: 5, result: payloads(reported) } },
    ] as unknown as History['events'];
    const state = rebuildRunState({ events }, description('FAILED'));
    expect(state.stages[0]).toMatchObject({ id: 'spec', status: 'failed', error: { type: 'AGENT_REPORTED_FAILURE', message: '[AGENT_REPORTED_FAILURE] stage spec: the task is impossible' } });
  });

  test("names the run's first execution as its activities were sent it (its folder's name), and none for a run started before", () => {
    expect(rebuildRunState(history, description('FAILED')).firstExecutionRunId).toBeUndefined();
    const owned = { eventId: 3, eventTime: at(0), activityTaskScheduledEventAttributes: { activityId: 'owner', input: payloads({ runId: 'run-1', firstExecutionRunId: 'first-exec' }) } };
    const events = [history.events![0], owned, ...history.events!.slice(1)] as unknown as History['events'];
    expect(rebuildRunState({ events }, description('FAILED')).firstExecutionRunId).toBe('first-exec');
    // A continued execution's history names it in the state its start carries.
    const carried = { ...input, carryOver: { state: { ...rebuildRunState(history, description('RUNNING')), firstExecutionRunId: 'first-exec' } } };
    const continued = [{ eventId: 1, eventTime: at(30), workflowExecutionStartedEventAttributes: { input: payloads(carried) } }] as unknown as History['events'];
    expect(rebuildRunState({ events: continued }, description('RUNNING')).firstExecutionRunId).toBe('first-exec');
  });

  test('leaves stages of an open run pending, and maps activities to their stage', () => {
    const state = rebuildRunState({ events: history.events!.slice(0, 6) }, description('RUNNING'));
    expect(state.status).toBe('running');
    expect(state.stages.map((s) => s.status)).toEqual(['completed', 'running', 'pending']);
    expect([...mapActivitiesToStages(history.events!)]).toEqual([['1', { stageId: 'spec', round: 1 }], ['2', { stageId: 'build', round: 1 }]]);
  });

  test('a terminated run: a stage that was ready (its needs completed) was cancelled, one behind it skipped, as the status query says', () => {
    const state = rebuildRunState({ events: history.events!.slice(0, 4) }, description('TERMINATED'));
    expect(state.status).toBe('terminated');
    expect(state.stages.map((s) => [s.id, s.status])).toEqual([['spec', 'completed'], ['build', 'cancelled'], ['ship', 'skipped']]);
  });

  test("of a run recorded before stages kept `firstStartedAt`, a reworked stage's first start is its first attempt's, in the rebuilt state and in the run's own result", async () => {
    // A real history (test/replay): `write` is reworked once after `review`, and the workflow of then kept only last starts.
    const recorded = await readHistory(path.join(PROJECT_ROOT, 'test', 'replay', 'histories', 'rework.json'));
    const events = recorded.events as unknown as NonNullable<History['events']>;
    const firstScheduled = (stage: string): number | undefined =>
      timestampMs(events.find((e) => decodeFirst<{ stage?: { id?: string } }>(e.activityTaskScheduledEventAttributes?.input)?.stage?.id === stage)?.eventTime);
    const rebuilt = rebuildRunState({ events }, { ...description('COMPLETED'), workflowId: 'rework' } as WorkflowExecutionDescription);
    expect(rebuilt.stages.map((s) => [s.id, s.round, s.firstStartedAt])).toEqual([
      ['write', 2, firstScheduled('write')],
      ['review', 2, firstScheduled('review')],
    ]);
    const result = decodeFirst<RunState>(events.at(-1)!.workflowExecutionCompletedEventAttributes?.result)!;
    expect(result.stages.map((s) => [s.id, s.firstStartedAt])).toEqual([['write', undefined], ['review', undefined]]);
    const filled = withFirstStarts(result, new Map(rebuilt.stages.map((s) => [s.id, s.firstStartedAt!])));
    expect(filled.stages.map((s) => [s.id, s.firstStartedAt])).toEqual([['write', firstScheduled('write')], ['review', firstScheduled('review')]]);
    // What `fork --dry-run` plans from: `write` was reworked after `review` first started, so a fork from `review` runs it
    // again; from the result as recorded it was listed as taken over, and the worker, planning from the checkpoint, ran it.
    // Its pipeline file as a run now carries it (the recorded run read its files from the worker: nothing to compare).
    const input = await prepareRunInput(path.join(PROJECT_ROOT, 'test', 'replay', 'fixtures', 'rework.yaml'), {}, []);
    expect(input.pipeline).toEqual(decodeFirst<PipelineRunInput>(events[0].workflowExecutionStartedEventAttributes?.input)!.pipeline);
    const plan = (state: RunState) => previewFork('rework', { state, input }, { runId: 'rework-fork', input }, { stage: 'review' });
    expect(plan(result).takenOver).toEqual(['write']);
    expect(plan(filled).takenOver).toEqual([]);
    expect(plan(filled).runAgain).toEqual(['write', 'review']);
  });
});
