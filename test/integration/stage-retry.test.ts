import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';

const PIPELINE = path.join(PROJECT_ROOT, 'test/fixtures/pipelines/overloaded-once.yaml');
const REPORT = '```json\n{"success": true, "summary": "Said hello.", "outputs": {}}\n```';

describe('a stage whose model is overloaded at first', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('retry', {
      scenario: { rules: [{ match: 'Stage: answer', turns: [{ text: `Hello.\n${REPORT}`, failFirst: [{ status: 529, type: 'overloaded_error' }] }] }] },
    });
  });
  afterAll(() => harness?.close());

  it('completes on a Temporal retry of the activity', async () => {
    const handle = await harness.start(PIPELINE);
    const state = await harness.finish(handle);

    expect(state.status).toBe('completed');
    const stage = state.stages[0];
    expect(stage.result?.attempt).toBe(2);
    expect(stage.result?.summary).toBe('Said hello.');
    const outcomes = harness.modelServer.requests().filter((r) => r.path === '/v1/messages').map((r) => r.status);
    expect(outcomes).toEqual([529, 200]);

    // The first attempt's failure is in the history, typed by the catalogue.
    const history = await handle.fetchHistory();
    const failed = history.events?.filter((e) => e.activityTaskFailedEventAttributes) ?? [];
    expect(failed).toHaveLength(0); // retried attempts are not events; the retry shows as attempt 2
    // The stage's activity, not the claim of the run's owner worker before it.
    const stageScheduled = history.events?.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runStage');
    const started = history.events?.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(stageScheduled?.eventId))?.activityTaskStartedEventAttributes;
    expect(started?.attempt).toBe(2);
    expect(started?.lastFailure?.applicationFailureInfo?.type).toBe('OVERLOADED');
  });
});
