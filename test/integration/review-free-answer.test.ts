import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { stageOf } from './workflow-helpers.js';

/*
 * A reviewed `contract: none` stage sent back for rework: its answer is the deliverable, so the rework message must not
 * ask for a report block (which would land in the deliverable). The real SDK against the scripted model, real Temporal.
 */

const report = (json: object): string => `\`\`\`json\n${JSON.stringify(json)}\n\`\`\``;

describe('rework of a contract: none stage', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('rework-free', {
      scenario: {
        rules: [
          { name: 'copy', match: 'Stage: copy ·', turns: [{ text: 'Buy Tandem, the task list for very very busy teams.' }, { text: 'Buy Tandem, the task list for teams.' }] },
          {
            name: 'review',
            match: 'Stage: review ·',
            turns: [
              { text: report({ success: true, summary: 'Too wordy.', verdict: 'rework', feedback: ['Drop "very very".'] }) },
              { text: report({ success: true, summary: 'Good.', verdict: 'approve', feedback: [] }) },
            ],
          },
        ],
      },
    });
  });
  afterAll(() => harness?.close());

  test('is asked for its whole answer again, with no report block', { timeout: 120_000 }, async () => {
    const state = await harness.finish(
      await harness.startYaml(
        'rework-free',
        `name: rework-free
defaults: { backend: anthropic-api, model: haiku }
stages:
  - id: copy
    contract: none
    prompt: Write one line of ad copy.
  - id: review
    needs: [copy]
    review: { of: copy, maxRounds: 2 }
    prompt: Review the copy.
`,
      ),
    );
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    expect(stageOf(state, 'copy').round).toBe(2);
    const rework = harness.modelServer.requests().find((r) => r.rule === 'copy' && r.turn === 1 && r.status === 200);
    const brief = JSON.stringify((rework?.body as { messages: unknown[] }).messages.at(-1));
    expect(brief).toContain('F1: Drop');
    expect(brief).not.toContain('JSON report block as before');
    expect(brief).toContain('give your whole answer again, revised');
    expect(await readFile(path.join(state.workspace!, 'outputs', 'copy.md'), 'utf8')).toBe('Buy Tandem, the task list for teams.');
  });
});
