import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { stageOf } from './workflow-helpers.js';

/*
 * Warm start through the whole stack: the workflow names the stages that become ready after each one, and the
 * worker starts their agents while it runs, so that the next stage's attempt adopts one.
 */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const PIPELINE = [
  'name: warm',
  'defaults: { backend: claude-cli, model: sonnet, retries: 0, permissionMode: dontAsk, allowedTools: [Read] }',
  'stages:',
  '  - id: one',
  '    prompt: Do one.',
  '  - id: two',
  '    needs: [one]',
  '    prompt: Do two.',
  '  - id: three',
  '    needs: [two]',
  '    prompt: Do three.',
].join('\n');

describe('warm start in a run', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('warm-start', {
      scenario: {
        rules: ['one', 'two', 'three'].map((id) => ({
          match: `Pipeline: warm · Stage: ${id} ·`,
          // A stage that takes a moment, as any real one does, so the next stage's agent is up before it is needed.
          turns: [{ text: report(`Did ${id}.`), delayMs: 1_500 }],
        })),
      },
    });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('the stages after the first adopt agents that were started while the stage before them ran', async () => {
    const state = await harness.finish(await harness.startYaml('warm', PIPELINE));
    expect(state.status).toBe('completed');
    expect(stageOf(state, 'one').result?.warmStart).toBe(false);
    expect(stageOf(state, 'two').result).toMatchObject({ warmStart: true, summary: 'Did two.', warnings: [] });
    expect(stageOf(state, 'three').result).toMatchObject({ warmStart: true, summary: 'Did three.', warnings: [] });
  });
});
