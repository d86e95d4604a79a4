import { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { OUTPUT_CAPS } from '../../src/pipeline/output-caps.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { retryStageUpdate } from '../../src/contracts/messages.js';
import { MAX_PERSON_RETRIES } from '../../src/workflows/person-decisions.js';
import { stageOf, waitForState } from './workflow-helpers.js';

/* The caps on an agent's report, end to end: the activity applies them, the workflow and `status` see the result. */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const answer = (report: object): string => `Done.\n\`\`\`json\n${JSON.stringify(report)}\n\`\`\``;
const rule = (pipeline: string, report: object): Rule => ({ name: pipeline, match: `Pipeline: ${pipeline} ·`, turns: [{ text: answer(report) }] });
const yaml = (name: string): string => `name: ${name}\ndefaults: { backend: anthropic-api, model: haiku, retries: 0 }\nstages:\n  - id: write\n    prompt: Write it.\n  - id: after\n    needs: [write]\n    prompt: "Then: {{stages.write.summary}}"\n`;

describe('caps on what a stage reports', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('output-caps', {
      scenario: {
        rules: [
          rule('caps-long-summary', { success: true, summary: 'S'.repeat(OUTPUT_CAPS.summaryBytes + 5000), outputs: { file: 'notes.md' } }),
          rule('caps-big-output', { success: true, summary: 'Wrote it.', outputs: { small: 'ok', report: 'R'.repeat(OUTPUT_CAPS.outputBytes + 1) } }),
          { ...rule('caps-retries', { success: false, summary: 'Broke again.', outputs: {}, error: 'it keeps breaking' }), repeatLastTurn: true },
        ],
        fallback: { text: answer({ success: true, summary: 'Then done.', outputs: {} }) },
      },
    });
  });
  afterAll(async () => harness?.close());

  test('a summary over its cap is cut with a warning, and the run goes on with the cut text', async () => {
    const state = await harness.finish(await harness.startYaml('caps-long-summary', yaml('caps-long-summary')));
    expect(state.status).toBe('completed');
    const write = stageOf(state, 'write').result!;
    expect(new TextEncoder().encode(write.summary).byteLength).toBeLessThanOrEqual(OUTPUT_CAPS.summaryBytes);
    expect(write.summary).toMatch(/^S+ … \[cut: 21384 bytes, over the 16 KB limit; the full text is in the transcript\]$/);
    expect(write.warnings).toContain("the answer's summary was 21 KB, over its limit of 16 KB; it was cut (the full text is in the transcript)");
    expect(write.outputs).toEqual({ file: 'notes.md' });
  });

  test('an output over its cap fails the stage OUTPUT_TOO_LARGE, naming the field, its size and the limit', async () => {
    const handle = await harness.startYaml('caps-big-output', yaml('caps-big-output'));
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const state = await harness.finish(handle);
    expect(stageOf(state, 'write')).toMatchObject({ status: 'failed', error: { type: 'OUTPUT_TOO_LARGE' } });
    expect(stageOf(state, 'write').error!.message).toContain(
      `[OUTPUT_TOO_LARGE] stage write: the answer's \`outputs.report\` is 65 KB (${OUTPUT_CAPS.outputBytes + 1} bytes), over its limit of 64 KB; have the agent write large results to a file`,
    );
    expect(stageOf(state, 'after').status).toBe('skipped');
    // Not retried: a second answer would be as large.
    expect(harness.modelServer.requests().filter((r) => r.rule === 'caps-big-output')).toHaveLength(1);
    expect(((error as WorkflowFailedError).cause as ApplicationFailure).message).toContain('outputs.report');
  });

  test(`a person may retry a failing stage ${MAX_PERSON_RETRIES} times in a round; the failure after that is final`, async () => {
    const handle = await harness.startYaml('caps-retries', `name: caps-retries\ndefaults: { backend: anthropic-api, model: haiku, retries: 0 }\nstages:\n  - id: write\n    prompt: Write it.\n    onFailure: ask\n`);
    let since = 0;
    for (let i = 0; i < MAX_PERSON_RETRIES; i++) {
      const state = await waitForState(handle, (s) => (stageOf(s, 'write').waitingFor?.kind === 'failure' && stageOf(s, 'write').waitingFor!.since > since));
      since = stageOf(state, 'write').waitingFor!.since;
      await handle.executeUpdate(retryStageUpdate, { args: [{ stage: 'write' }] });
    }
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const state = await harness.finish(handle);
    expect(stageOf(state, 'write')).toMatchObject({ status: 'failed', error: { type: 'AGENT_REPORTED_FAILURE' } });
    expect(stageOf(state, 'write').error!.message).toContain(`(after ${MAX_PERSON_RETRIES} retries a person asked for, the most one round allows; start a new run to try again)`);
    expect(harness.modelServer.requests().filter((r) => r.rule === 'caps-retries')).toHaveLength(MAX_PERSON_RETRIES + 1);
  }, 240_000);
});
