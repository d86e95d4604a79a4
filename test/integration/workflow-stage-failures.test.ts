import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ScenarioInput } from '../../src/dev/scenario.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { waitFor } from './claude-cli-world.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 10 item 7, on the anthropic-api backend (the real SDK against the scripted model server) and a real worker:
 * retries running out, a cancel during a retry's backoff, and the agent persona reaching the request's `system`.
 */

type Rule = NonNullable<ScenarioInput['rules']>[number];
const REPORT = '```json\n{"success": true, "summary": "done", "outputs": {}}\n```';
const rule = (pipeline: string, turns: Rule['turns']): Rule => ({ name: pipeline, match: `Pipeline: ${pipeline} ·`, turns });
const PERSONA = 'You are Margo, a terse release critic who answers in haiku.';

let harness: Harness;
beforeAll(async () => {
  harness = await createHarness('stage-failures', {
    scenario: {
      rules: [
        // Three attempts, three different failures: the stage must report the last one.
        rule('exhausted', [{ text: REPORT, failFirst: [{ status: 529 }, { status: 529 }, { status: 500 }] }]),
        rule('backoff', [{ error: { status: 429, retryAfter: 5 } }]),
        rule('persona', [{ text: REPORT }]),
      ],
    },
  });
});
afterAll(async () => {
  await harness?.close();
});

const requestsOf = (name: string) => harness.modelServer.requests().filter((r) => r.rule === name);

describe('stage failures and retries in a real run', () => {
  test('when retries run out, the stage fails with the last attempt’s failure type and the run’s error names it', async () => {
    const yaml = 'name: exhausted\ndefaults: { backend: anthropic-api, model: haiku, retries: 2, maxTokens: 200 }\nstages:\n  - id: build\n    prompt: Build it.\n';
    const handle = await harness.startYaml('exhausted', yaml);
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(requestsOf('exhausted').map((r) => r.status)).toEqual([529, 529, 500]);
    expect(stageOf(state, 'build')).toMatchObject({ status: 'failed', error: { type: 'SERVER_ERROR' } });
    expect(error).toBeInstanceOf(WorkflowFailedError);
    const cause = (error as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect(cause.type).toBe('SERVER_ERROR');
    expect(cause.message).toMatch(/SERVER_ERROR.*build|build.*SERVER_ERROR/);
    expect(state.error?.type).toBe('SERVER_ERROR');
  });

  test('cancelling a run while its stage waits out a retry backoff starts no further attempt', { timeout: 120_000 }, async () => {
    const yaml = 'name: backoff\ndefaults: { backend: anthropic-api, model: haiku, retries: 3, maxTokens: 200 }\nstages:\n  - id: build\n    prompt: Build it.\n';
    const handle = await harness.startYaml('backoff', yaml);
    // The first attempt was rate limited and the next one is scheduled after the 5 s the API asked for.
    await waitFor(
      async () => (await handle.describe()).raw.pendingActivities?.[0]?.attempt ?? 0,
      (attempt) => attempt >= 2,
      'the stage to wait for its second attempt',
      60_000,
    );
    expect(requestsOf('backoff')).toHaveLength(1);
    await handle.cancel();
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    const state = await harness.finish(handle);
    expect(state.status).toBe('cancelled');
    expect(stageOf(state, 'build').status).toBe('cancelled');
    // Well past the backoff: a retry that survived the cancel would have asked the model again by now.
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    expect(requestsOf('backoff')).toHaveLength(1);
  });

  test("the agent file's persona reaches the API request's system field", async () => {
    const file = await harness.writePipeline(
      'persona',
      'name: persona\ndefaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 200 }\nstages:\n  - id: critique\n    agent: agents/critic.md\n    prompt: Critique the release.\n',
    );
    await mkdir(path.join(path.dirname(file), 'agents'), { recursive: true });
    await writeFile(path.join(path.dirname(file), 'agents', 'critic.md'), `---\nname: critic\ndescription: Reviews releases\n---\n${PERSONA}\n`);
    const state = await harness.finish(await harness.start(file));
    expect(state.status).toBe('completed');
    const [request] = requestsOf('persona');
    const body = request.body as { system?: string | { text: string }[]; messages: { content: unknown }[] };
    const system = typeof body.system === 'string' ? body.system : (body.system ?? []).map((b) => b.text).join('\n');
    expect(system).toContain(PERSONA);
    // The persona is the system prompt, not part of the task the user message carries.
    expect(JSON.stringify(body.messages)).not.toContain(PERSONA);
  });
});
