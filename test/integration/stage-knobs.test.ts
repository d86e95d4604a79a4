import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareRunInput } from '../../src/library/pipeline-source.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import type { RunJson } from '../../src/cli/json.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { parseJson, runCli } from './cli-helpers.js';
import { stageOf } from './workflow-helpers.js';

/*
 * The stage knobs of issue 24, each through a real run (real Temporal, the real `claude` binary or the real SDK, a
 * scripted model): `retry:` as Temporal's retry policy, the agent's full answer, `onBlocked: fail`, every report field,
 * and object inputs.
 */

const report = (json: object): string => `\`\`\`json\n${JSON.stringify(json)}\n\`\`\``;
const ANSWER_TEXT = 'I read the code.\n\nThe parser accepts empty lines and the tests cover both branches.';
/** An answer well over the run state's 16 KB cap, with a last line to find. */
const LONG_ANSWER = `${Array.from({ length: 2000 }, (_, i) => `Line ${i + 1} of the long answer.`).join('\n')}\nThe end.`;

describe('stage knobs', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('knobs', {
      scenario: {
        rules: [
          { name: 'empty', match: 'Stage: empty ·', turns: [{ text: '' }] },
          { name: 'perrun', match: 'Stage: perrun ·', turns: [{ text: report({ success: true, summary: 'Ran with the run\'s options.', outputs: {} }) }] },
          { name: 'long', match: 'Stage: long ·', turns: [{ text: `${LONG_ANSWER}\n${report({ success: true, summary: 'Answered at length.', outputs: {} })}` }] },
          {
            name: 'inspect',
            match: 'Stage: inspect ·',
            turns: [{ text: `${ANSWER_TEXT}\n${report({ success: true, summary: 'Inspected.', outputs: { files: 2 }, issues: [{ title: 'No test for tabs', severity: 'low' }], pr_ready: false })}` }],
          },
          { name: 'followup', match: 'Stage: followup ·', turns: [{ text: report({ success: true, summary: 'Followed up.', outputs: {} }) }] },
          { name: 'notes', match: 'Stage: notes ·', turns: [{ text: `Release notes: tabs are parsed.\n${report({ success: true, summary: 'Wrote notes.', outputs: {}, audience: 'users' })}` }] },
          { name: 'stuck', match: 'Stage: stuck ·', turns: [{ text: 'I looked for the credentials.\nBLOCKED: the deploy key is missing from the vault' }] },
          { name: 'record', match: 'Stage: record ·', turns: [{ text: report({ success: true, summary: 'Recorded.', outputs: {} }) }] },
          { name: 'elicit', match: 'Stage: elicit ·', turns: [{ text: report({ success: true, summary: 'Used the answers.', outputs: {} }) }] },
        ],
      },
    });
  });
  afterAll(() => harness?.close());

  const requestsOf = (rule: string) => harness.modelServer.requests().filter((r) => r.path === '/v1/messages' && r.rule === rule);

  it('maps `retry:` onto the activity\'s retry policy; RESPONSE_EMPTY in nonRetryable makes an empty answer final', { timeout: 180_000 }, async () => {
    const handle = await harness.startYaml(
      'retry-policy',
      `name: retry-policy
defaults:
  backend: anthropic-api
  retries: 3
  retry: { initialInterval: 2s, backoffCoefficient: 3, nonRetryable: [RESPONSE_EMPTY] }
stages:
  - id: empty
    prompt: Say something.
    retry: { maximumInterval: 20s }
`,
    );
    const state = await harness.finish(handle);
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('RESPONSE_EMPTY');
    // The failure says what happened: final, not "retried".
    expect(state.error?.message).toContain("the stage's `retry.nonRetryable` lists RESPONSE_EMPTY");
    expect(state.error?.message).not.toContain('the attempt is retried');
    // Not retried: one request, though the stage has 3 retries.
    expect(requestsOf('empty').filter((r) => r.status === 200)).toHaveLength(1);
    const history = await handle.fetchHistory();
    const scheduled = history.events?.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runStage')?.activityTaskScheduledEventAttributes;
    const policy = scheduled?.retryPolicy;
    expect(policy?.maximumAttempts).toBe(4);
    expect(Number(policy?.initialInterval?.seconds)).toBe(2);
    expect(policy?.backoffCoefficient).toBe(3);
    // The stage's own field joins the defaults' fields.
    expect(Number(policy?.maximumInterval?.seconds)).toBe(20);
    expect(policy?.nonRetryableErrorTypes).toEqual(['RESPONSE_EMPTY']);
  });

  it('retries an empty answer when the policy does not list RESPONSE_EMPTY', { timeout: 180_000 }, async () => {
    const before = requestsOf('empty').length;
    const handle = await harness.startYaml(
      'retry-empty',
      `name: retry-empty
defaults: { backend: anthropic-api, retries: 1, retry: { initialInterval: 100ms } }
stages:
  - id: empty
    prompt: Say something.
`,
    );
    const state = await harness.finish(handle);
    expect(state.error?.type).toBe('RESPONSE_EMPTY');
    expect(requestsOf('empty').length - before).toBe(2);
  });

  it('fills model, timeout, permissionMode and maxBudgetUsd from the run\'s inputs, and fails a bad value at once naming the input and the field', { timeout: 180_000 }, async () => {
    const file = await harness.writePipeline(
      'per-run-options',
      `name: per-run-options
inputs:
  model: { default: sonnet }
  timeout: { default: 10m }
  mode: { default: dontAsk }
  budget: { default: "3" }
defaults: { model: "{{inputs.model}}", heartbeatTimeout: 1m }
stages:
  - id: perrun
    backend: claude-cli
    allowedTools: [Read]
    timeout: "{{inputs.timeout}}"
    permissionMode: "{{inputs.mode}}"
    maxBudgetUsd: "{{inputs.budget}}"
    prompt: Use the run's options.
`,
    );
    const handle = await harness.start(file, { model: 'haiku', timeout: '7m', mode: 'acceptEdits', budget: '0.75' });
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    // The model the run asked for reached the API, never the template text.
    const request = requestsOf('perrun').find((r) => r.status === 200)!;
    const body = request.body as { model: string; messages: unknown[] };
    expect(body.model).toMatch(/haiku/);
    expect(JSON.stringify(body.messages)).toContain('Spend at most $0.75 on this stage.');
    expect(JSON.stringify(body)).not.toContain('{{inputs.');
    const history = await handle.fetchHistory();
    const scheduled = history.events?.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runStage')?.activityTaskScheduledEventAttributes;
    expect(Number(scheduled?.startToCloseTimeout?.seconds)).toBe(7 * 60);
    // A value the option cannot take fails the run before any stage, naming the input, the field and the fix.
    const failure = await (await harness.start(file, { timeout: 'soon' })).result().then(() => undefined, (err: unknown) => err);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    const cause = (failure as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('PIPELINE_INVALID');
    expect(cause.message).toContain('pipeline.stages[0].timeout: input timeout is "soon", which timeout cannot take');
    expect(cause.message).toContain('--input timeout=');
  });

  it('keeps a cut answer whole: final-answer and RunHandle.finalAnswer return all of it, or say where it is', { timeout: 180_000 }, async () => {
    const handle = await harness.startYaml('long-answer', 'name: long-answer\ndefaults: { heartbeatTimeout: 1m }\nstages:\n  - { id: long, backend: claude-cli, model: haiku, allowedTools: [Read], prompt: Answer at length. }\n');
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    const result = stageOf(state, 'long').result!;
    // The run state keeps it cut; the result names where the whole text is.
    expect(Buffer.byteLength(result.answer!)).toBeLessThan(17_000);
    // In the workers' store (here the default one, in the workspaces folder), under the run's keys.
    expect(result.answerRef).toMatchObject({ store: true, bytes: Buffer.byteLength(LONG_ANSWER), key: expect.stringMatching(/^runs\/[0-9a-f]{64}\/answers\/[0-9a-f]{64}$/) });
    const client = await PipelineClient.connect({ env: harness.env });
    try {
      // Read from the default store of the workspaces folder (AGENT_PIPELINE_WORKSPACES unless told), as the workers keep it.
      expect(await client.getRun(handle.workflowId).finalAnswer('long', { workspacesRoot: harness.workspacesRoot })).toBe(LONG_ANSWER);
    } finally {
      await client.close();
    }
    const cli = await runCli(['final-answer', handle.workflowId, '--stage', 'long'], harness.env);
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(cli.stdout).toBe(LONG_ANSWER); // execa drops the final newline the command prints
    // From a host that does not see the workers' folder and has no store setting: exit 2, naming the setting that reaches it.
    const elsewhere = await runCli(['final-answer', handle.workflowId, '--stage', 'long'], { ...harness.env, AGENT_PIPELINE_WORKSPACES: path.join(harness.workspacesRoot, 'not-here') });
    expect(elsewhere.exitCode).toBe(2);
    expect(elsewhere.stderr).toContain('[FINAL_ANSWER_NOT_FOUND]');
    expect(elsewhere.stderr).toContain('AGENT_PIPELINE_STORE');
  });

  it('keeps a CLI stage\'s answer and every report field for later stages, the library and status', { timeout: 180_000 }, async () => {
    const handle = await harness.startYaml(
      'answers',
      `name: answers
defaults: { heartbeatTimeout: 1m }
stages:
  - id: inspect
    prompt: Inspect the code.
  - id: followup
    needs: [inspect]
    # Its agent is not what is tested (the prompt it was given is): the API backend spares a \`claude\` run.
    backend: anthropic-api
    prompt: |
      The inspector said:
      {{stages.inspect.answer}}
      Open issues: {{stages.inspect.report.issues}}
      Ready: {{stages.inspect.report.pr_ready}}
  - id: notes
    needs: [inspect]
    backend: anthropic-api
    prompt: Write release notes.
`,
    );
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const inspect = stageOf(state, 'inspect').result!;
    // The answer without its report block; the contract's fields stay where they were.
    expect(inspect.answer).toBe(ANSWER_TEXT);
    expect(inspect.outputs).toEqual({ files: 2 });
    expect(inspect.report).toEqual({ issues: [{ title: 'No test for tabs', severity: 'low' }], pr_ready: false });
    const followup = JSON.stringify(requestsOf('followup')[0]?.body);
    expect(followup).toContain('The parser accepts empty lines and the tests cover both branches.');
    expect(followup).toContain('No test for tabs');
    expect(followup).toContain('Ready: false');
    // An API stage keeps its answer and report fields alike.
    expect(stageOf(state, 'notes').result).toMatchObject({ answer: 'Release notes: tabs are parsed.', report: { audience: 'users' } });
    // `status --json` shows them too.
    const status = await runCli(['status', handle.workflowId, '--json'], harness.env);
    expect(status.exitCode, status.stderr).toBe(0);
    const inspected = parseJson<RunJson>(status).stages.find((s) => s.id === 'inspect')?.result;
    expect(inspected?.answer).toBe(ANSWER_TEXT);
    expect(inspected?.report?.pr_ready).toBe(false);
  });

  it('ends the run failed with AGENT_BLOCKED on a BLOCKED answer under onBlocked: fail; finally sees run.error.type', { timeout: 180_000 }, async () => {
    const handle = await harness.startYaml(
      'blocked-fail',
      // The answer is read and the run ended the same for either backend (pipeline/contract.ts, the workflow): the API
      // backend spares two `claude` runs.
      `name: blocked-fail
defaults: { backend: anthropic-api, heartbeatTimeout: 1m, onBlocked: fail }
stages:
  - id: stuck
    prompt: Deploy the service.
    onFailure: ask
finally:
  - id: record
    prompt: "Outcome: status={{run.status}} type={{run.error.type}} reason={{run.error.message}}"
`,
    );
    const state = await harness.finish(handle);
    // A terminal outcome: failed, not the waiting state `blocked`, and `onFailure: ask` does not hold it.
    expect(state.status).toBe('failed');
    expect(state.error?.type).toBe('AGENT_BLOCKED');
    expect(state.error?.message).toContain('the deploy key is missing from the vault');
    expect(stageOf(state, 'stuck')).toMatchObject({ status: 'failed', error: { type: 'AGENT_BLOCKED' } });
    expect(stageOf(state, 'record').status).toBe('completed');
    const record = JSON.stringify(requestsOf('record')[0]?.body);
    expect(record).toContain('status=failed type=AGENT_BLOCKED reason=[AGENT_BLOCKED] stage stuck: the agent is blocked: the deploy key is missing from the vault');
  });

  it('takes an object input from a JSON file: key-value lines in the prompt, one key by {{inputs.NAME.KEY}}', { timeout: 180_000 }, async () => {
    const file = await harness.writePipeline(
      'object-input',
      `name: object-input
inputs:
  elicitation: { type: object, required: true }
defaults: { heartbeatTimeout: 1m }
stages:
  - id: elicit
    # Its agent is not what is tested (the prompt it was given is): the API backend spares a \`claude\` run.
    backend: anthropic-api
    prompt: "Scope chosen: {{inputs.elicitation.scope}}. All answers:\\n{{inputs.elicitation}}"
`,
    );
    const answers = path.join(path.dirname(file), 'answers.json');
    await writeFile(answers, JSON.stringify({ scope: 'prose only', depth: 2, draft: true }));
    // The library's way: `{ file }`, as `--input elicitation=@answers.json` gives it.
    const input = await prepareRunInput(file, { inputs: { elicitation: { file: answers } } });
    expect(JSON.parse(input.inputs.elicitation)).toEqual({ scope: 'prose only', depth: 2, draft: true });
    const handle = await harness.start(file, input.inputs);
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const body = JSON.stringify(requestsOf('elicit')[0]?.body);
    expect(body).toContain('Scope chosen: prose only. All answers:\\nscope: prose only\\ndepth: 2\\ndraft: true');
    // The run inputs section shows it as key-value lines too.
    expect(body).toContain('- elicitation:\\n  scope: prose only\\n  depth: 2\\n  draft: true');
  });

  it('refuses bad JSON for an object input, naming the input and the file', async () => {
    const file = await harness.writePipeline('object-input-bad', 'name: object-input-bad\ninputs:\n  elicitation: { type: object }\nstages:\n  - id: elicit\n    prompt: Go.\n');
    const bad = path.join(path.dirname(file), 'bad.json');
    await writeFile(bad, '{"scope": "prose only",');
    await expect(prepareRunInput(file, { inputs: { elicitation: { file: bad } } })).rejects.toThrow(
      `[INPUT_INVALID] input "elicitation" ({ file: "${bad}" }) of ${file} is \`type: object\`, but it is not valid JSON`,
    );
    const nested = path.join(path.dirname(file), 'nested.json');
    await writeFile(nested, '{"scope": {"deep": 1}}');
    await expect(prepareRunInput(file, { inputs: { elicitation: { file: nested } } })).rejects.toThrow('key "scope": its value must be a string, number or boolean');
    // The command line names the flag, and exits 2 before it connects.
    const cli = await runCli(['start', file, '--input', `elicitation=@${bad}`], harness.env);
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toContain(`[INPUT_INVALID] --input elicitation=@${bad} of ${file} is \`type: object\`, but it is not valid JSON`);
  });
});
