import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * An API stage whose answer is still cut off after its continuations, run by a real worker: Temporal retries the
 * activity for the report, and the final stage result keeps both the deliverable and attempt 1's warning.
 */

const PIPELINE = [
  'name: truncated',
  'defaults: { backend: anthropic-api, model: haiku, maxTokens: 300, maxContinuations: 1 }',
  'stages:',
  '  - id: notes',
  '    prompt: Write the release notes.',
].join('\n');

describe('a truncated API answer in a real run', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('truncated', {
      scenario: {
        rules: [
          {
            match: 'Stage: notes ·',
            turns: [
              { text: '# Release notes\n\n- Faster start', stopReason: 'max_tokens' },
              { text: 'up\n- Dark mode\n```json\n{"success": tr', stopReason: 'max_tokens' },
              { text: '```json\n{"success": true, "summary": "Notes written.", "outputs": {}}\n```' },
            ],
          },
        ],
      },
    });
  });
  afterAll(() => harness?.close());

  it('completes on the report retry with the whole answer as its deliverable and attempt 1\'s RESPONSE_TRUNCATED', async () => {
    const handle = await harness.start(await harness.writePipeline('truncated', PIPELINE));
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const [stage] = state.stages;
    expect(stage.result).toMatchObject({ status: 'completed', summary: 'Notes written.', attempt: 2 });
    expect(stage.result?.warnings).toEqual([expect.stringMatching(/^RESPONSE_TRUNCATED: the answer stopped at max_tokens \(300\) after 1 continuation/)]);
    expect(await readFile(path.join(state.workspace!, 'outputs/notes.md'), 'utf8')).toBe('# Release notes\n\n- Faster startup\n- Dark mode\n');
    expect(harness.modelServer.requests().filter((r) => r.path === '/v1/messages')).toHaveLength(3);
  });
});
