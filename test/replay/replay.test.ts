import { Worker } from '@temporalio/worker';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { payloadCodecsFor, workerDataConverter } from '../../src/codec/data-converter.js';
import { ENCRYPTED_WORKFLOW_BUNDLE, WORKFLOW_BUNDLE } from '../helpers/project-paths.js';
import { parseHistory, readHistory } from './load-history.js';

/*
 * Recorded runs replayed against the current workflow code (the bundle `npm run build` writes): a change that
 * would break runs already in flight fails here. After a deliberate change, re-record the histories
 * (`npm run build && node test/replay/record-all.mjs`, see docs/development.md).
 */

// `long-before-continue-as-new` was recorded on the code before continue-as-new, on a server that suggested continuing
// as new from event 60 (fixtures/long-before-continue-as-new.yaml says how); record-all.mjs leaves it as it is.
const HISTORIES = [
  'linear',
  'parallel',
  'rework',
  'question',
  'cancelled',
  'flows',
  'linear-input-check',
  'continued-first',
  'continued-last',
  'long-before-continue-as-new',
  'flows-template-values',
  'question-signed',
  'forked',
];
const file = (name: string): string => path.join(import.meta.dirname, 'histories', `${name}.json`);
/** Both executions of the continued run belong to one workflow id. */
const workflowIdOf = (name: string): string => `replay-${name.replace(/^continued-.*/, 'continued')}`;
const options = { workflowBundle: { codePath: WORKFLOW_BUNDLE } };

describe('replaying recorded runs', () => {
  test('every recorded history replays on the current workflow code', async () => {
    const histories = await Promise.all(HISTORIES.map(async (name) => ({ workflowId: workflowIdOf(name), history: await readHistory(file(name)) })));
    const results: { workflowId: string; error?: unknown }[] = [];
    for await (const result of Worker.runReplayHistories(options, histories)) results.push(result);
    expect(results.map((r) => [r.workflowId, r.error === undefined ? 'ok' : String(r.error)])).toEqual(HISTORIES.map((name) => [workflowIdOf(name), 'ok']));
  });

  test('a signed run is covered: its trust check, and each decision checked by a local activity in its update handler', async () => {
    type Event = { eventType: string; markerRecordedEventAttributes?: { details?: Record<string, { payloads?: { data: string }[] }> } };
    const { events } = JSON.parse(await readFile(file('question-signed'), 'utf8')) as { events: Event[] };
    const markers = events.flatMap((e) => Object.values(e.markerRecordedEventAttributes?.details ?? {}).flatMap((d) => d.payloads ?? []))
      .map((p) => Buffer.from(p.data, 'base64').toString());
    expect(markers.some((m) => m.includes('"sign23-signed-runs"'))).toBe(true);
    expect(markers.filter((m) => m.includes('"activity_type":"checkRunTrust"'))).toHaveLength(1);
    expect(markers.filter((m) => m.includes('"activity_type":"verifyDecision"'))).toHaveLength(2);
    expect(events.filter((e) => e.eventType === 'EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED')).toHaveLength(2);
  });

  test('both sides of a hand-over are covered: an execution that continued as new, and one that started from carried state', async () => {
    type Event = {
      eventType: string;
      markerRecordedEventAttributes?: { details?: { 'patch-data'?: { payloads?: { data: string }[] } } };
      workflowExecutionStartedEventAttributes?: { continuedExecutionRunId?: string; input?: { payloads?: { data: string }[] } };
    };
    const events = async (name: string): Promise<Event[]> => (JSON.parse(await readFile(file(name), 'utf8')) as { events: Event[] }).events;
    const first = await events('continued-first');
    expect(first.at(-1)?.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW');
    const patches = first.flatMap((e) => e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads ?? []).map((p) => Buffer.from(p.data, 'base64').toString());
    expect(patches.some((p) => p.includes('continue-as-new'))).toBe(true);
    const last = await events('continued-last');
    const started = last[0].workflowExecutionStartedEventAttributes;
    expect(started?.continuedExecutionRunId).toBeTruthy();
    const input = JSON.parse(Buffer.from(started!.input!.payloads![0].data, 'base64').toString()) as { carryOver?: { version: number; executions: number } };
    expect(input.carryOver).toMatchObject({ version: 1, executions: 1 });
    expect(last.at(-1)?.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
  });

  test('a run recorded before hand-overs existed went on past the point where Temporal suggested one, and still replays', async () => {
    type Event = { eventType: string; workflowTaskStartedEventAttributes?: { suggestContinueAsNew?: boolean } };
    const events = (JSON.parse(await readFile(file('long-before-continue-as-new'), 'utf8')) as { events: Event[] }).events;
    const suggested = events.findIndex((e) => e.workflowTaskStartedEventAttributes?.suggestContinueAsNew);
    expect(suggested).toBeGreaterThan(0);
    // Stages were still started after the suggestion: today's code must not stop there when it replays this run.
    expect(events.slice(suggested).filter((e) => e.eventType === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED').length).toBeGreaterThan(2);
    expect(events.at(-1)?.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
  });

  test('both ways of checking the input are covered: in the workflow (before the patch) and as a local activity', async () => {
    const markers = async (name: string): Promise<string[]> =>
      (JSON.parse(await readFile(file(name), 'utf8')) as { events: { markerRecordedEventAttributes?: { markerName: string } }[] }).events
        .flatMap((e) => (e.markerRecordedEventAttributes ? [e.markerRecordedEventAttributes.markerName] : []));
    expect(await markers('linear')).toEqual([]);
    expect(await markers('linear-input-check')).toEqual(['core_patch', 'core_local_activity']);
  });

  test('both ways of sending template values are covered: every value to every stage (before the patch), and by reference', async () => {
    const patches = async (name: string): Promise<string[]> => {
      type Marker = { markerName: string; details?: Record<string, { payloads: { data: string }[] }> };
      const history = JSON.parse(await readFile(file(name), 'utf8')) as { events: { markerRecordedEventAttributes?: Marker }[] };
      return history.events.flatMap(({ markerRecordedEventAttributes: marker }) =>
        marker?.markerName === 'core_patch' ? [(JSON.parse(Buffer.from(marker.details!['patch-data'].payloads[0].data, 'base64').toString()) as { id: string }).id] : [],
      );
    };
    expect(await patches('flows')).not.toContain('template-values-by-reference');
    expect(await patches('flows-template-values')).toEqual(expect.arrayContaining(['template-values-by-reference', 'bounded-current-stages']));
  });

  test("the deployment's own workflows as workers before issue 33 left them replay, a stranger's plain release and pause included", async () => {
    // Recorded encrypted (record-trust-histories.mjs): replayed with the converters of encrypting workers, which mark
    // the stranger's plain messages; without the trust33 patches' gating, those would now be ignored and diverge.
    const key = (await readFile(path.join(import.meta.dirname, 'fixtures', 'trust-encryption-key.txt'), 'utf8')).trim();
    const encrypted = { workflowBundle: { codePath: ENCRYPTED_WORKFLOW_BUNDLE }, dataConverter: workerDataConverter(payloadCodecsFor(key)) };
    for (const [name, workflowId] of [['lease-before-trust', 'replay-lease-before-trust'], ['api-key-before-trust', 'replay-api-key-before-trust']]) {
      const json = JSON.parse(await readFile(file(name), 'utf8')) as unknown;
      // `json/plain` in base64: a payload nobody encrypted, among the encrypted ones.
      expect(JSON.stringify(json), `${name} holds a plain payload a stranger sent`).toContain('"encoding":"anNvbi9wbGFpbg=="');
      await Worker.runReplayHistory(encrypted, parseHistory(json), workflowId);
    }
  });

  test('a history whose commands differ from the code fails with a determinism violation', async () => {
    const json = JSON.parse(await readFile(file('linear'), 'utf8')) as { events: { eventType: string; activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[] };
    const scheduled = json.events.find((e) => e.eventType === 'EVENT_TYPE_ACTIVITY_TASK_SCHEDULED');
    scheduled!.activityTaskScheduledEventAttributes!.activityType.name = 'runStageRenamed';
    const error = await Worker.runReplayHistory(options, parseHistory(json)).then(() => undefined, (e: unknown) => e as Error);
    expect(error?.name).toBe('DeterminismViolationError');
    expect(error?.message).toContain('runStageRenamed');
  });
});
