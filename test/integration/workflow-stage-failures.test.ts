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
/** The pause the rate-limited call is asked to wait out. @unit seconds */
const RETRY_AFTER = 15;

let harness: Harness;
beforeAll(async () => {
  harness = await createHarness('stage-failures', {
    scenario: {
      rules: [
        // Three attempts, three different failures: the stage must report the last one.
        rule('exhausted', [{ text: REPORT, failFirst: [{ status: 529 }, { status: 529 }, { status: 500 }] }]),
        rule('persona', [{ text: REPORT }]),
      ],
    },
  });
});
afterAll(async () => {
  await harness?.close();
});

const requestsOf = (name: string) => harness.modelServer.requests().filter((r) => r.rule === name);

// Each test runs a pipeline of its own, answered by its own rule and read back by it: they run at once, so the
// others do not wait behind the 15 s rate-limit pause and the watch past it of the cancel test. That test has a worker
// and API key of its own: a 429 pauses every call on its key, the other tests' too.
describe.concurrent('stage failures and retries in a real run', () => {
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

  test('cancelling a run while its stage waits out a 429 starts no further call', { timeout: 120_000 }, async ({ onTestFinished }) => {
    const own = await createHarness('stage-backoff', {
      scenario: { rules: [rule('backoff', [{ error: { status: 429, retryAfter: RETRY_AFTER } }])] },
      env: { ANTHROPIC_API_KEY: 'sk-test-stage-backoff-key' },
    });
    onTestFinished(() => own.close());
    const requestsOf = (name: string) => own.modelServer.requests().filter((r) => r.rule === name);
    const yaml = 'name: backoff\ndefaults: { backend: anthropic-api, model: haiku, retries: 3, maxTokens: 200 }\nstages:\n  - id: build\n    prompt: Build it.\n';
    const handle = await own.startYaml('backoff', yaml);
    // The first call was rate limited: the attempt waits out the 15 s the API asked for (docs/rate-limits.md).
    await waitFor(
      async () => requestsOf('backoff').length,
      (calls) => calls >= 1,
      'the stage to be rate limited',
      60_000,
    );
    expect(requestsOf('backoff')).toHaveLength(1);
    await handle.cancel();
    const error = await handle.result().then(() => undefined, (err: unknown) => err);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    const state = await own.finish(handle);
    expect(state.status).toBe('cancelled');
    expect(stageOf(state, 'build').status).toBe('cancelled');
    // Past the pause (counted from the 429, not from the cancel's end, which comes seconds later): a wait that survived
    // the cancel would have asked the model again by now.
    const pauseEnd = Date.parse(requestsOf('backoff')[0].time) + RETRY_AFTER * 1_000;
    await new Promise((resolve) => setTimeout(resolve, pauseEnd + 3_000 - Date.now()));
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
