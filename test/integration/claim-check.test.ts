import { RawValue, type Payload } from '@temporalio/common';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CLAIM_CHECK_ENCODING, CLAIM_KEY_METADATA } from '../../src/codec/claim-check-codec.js';
import { PIPELINE_WORKFLOW_TYPE } from '../../src/contracts/messages.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { PipelineClient } from '../../src/library/index.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { eventually, parseJson, runCli } from './cli-helpers.js';
import { payloadsIn } from '../helpers/history-payloads.js';

/*
 * Issue 29, large values out of history: with the real Temporal dev server, a worker and the scripted model, payloads
 * over AGENT_PIPELINE_CLAIM_CHECK_BYTES (256 KiB) go to the store and history holds references. A stage answering a
 * ~370 KB result completes; its activity result, the run's state and result are references in history; `status
 * --json` and the library read the values back; a client whose AGENT_PIPELINE_STORE is another store is told so. A
 * 20 MB input file (over the 2 MB a run's input could be) reaches its stage whole.
 */

const CHUNK = 62_000;
const big = (letter: string): string => `${letter}-start-${letter.repeat(CHUNK)}-end`;
const BIG_REPORT = {
  success: true,
  summary: 'Wrote a lot.',
  outputs: { a: big('a'), b: big('b'), c: big('c'), d: big('d') },
  notes: big('n'),
  more: big('m'),
};
const INPUT_END = 'END-OF-THE-TWENTY-MB-INPUT-5c1e';
const SMALL_REPORT = '```json\n{"success": true, "summary": "Read it.", "outputs": {}}\n```';
const THEIR_END = 'END-OF-THEIR-INPUT-8d2b7f';
const SCHEDULED_END = 'END-OF-THE-SCHEDULED-INPUT-41c9';
/** A pipeline reading one large input, on the scripted API backend. */
const readingPipeline = (name: string): string =>
  `name: ${name}\ninputs:\n  big: { required: true }\ndefaults: { backend: anthropic-api, model: haiku, maxTokens: 500, retries: 0 }\nstages:\n  - id: read\n    prompt: Read the input.\n`;

let harness: Harness;
let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'claim-check-'));
  harness = await createHarness('claim-check', {
    scenario: {
      rules: [
        { match: 'Pipeline: claim-big', turns: [{ text: `Done.\n\`\`\`json\n${JSON.stringify(BIG_REPORT)}\n\`\`\`` }] },
        { match: 'Pipeline: claim-input', turns: [{ text: SMALL_REPORT }] },
        { match: 'Pipeline: claim-theirs', turns: [{ text: SMALL_REPORT }] },
        { match: 'Pipeline: claim-scheduled', turns: [{ text: SMALL_REPORT }] },
      ],
    },
    // Set explicitly, so that the harness's client (and PipelineClient) put their own large payloads there too.
    env: { AGENT_PIPELINE_STORE: `file://${path.join(scratch, 'store')}` },
  });
}, 120_000);
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const encodingOf = (payload: Payload): string => Buffer.from(payload.metadata?.encoding ?? new Uint8Array()).toString();

async function historyPayloads(runId: string): Promise<Payload[]> {
  return payloadsIn((await harness.client.workflow.getHandle(runId).fetchHistory()).events);
}

describe('large values out of history (the claim check)', () => {
  test('a stage answering a ~370 KB result completes, history holds references, and status --json and the library read it', { timeout: 180_000 }, async () => {
    const yaml =
      'name: claim-big\ndefaults: { backend: anthropic-api, model: haiku, maxTokens: 500, retries: 0 }\n' +
      'stages:\n  - id: write\n    prompt: Write a lot.\n';
    const handle = await harness.startYaml('claim-big', yaml);
    const state = await harness.finish(handle);
    expect(state.status).toBe('completed');
    const payloads = await historyPayloads(handle.workflowId);
    // The stage's result (and the run's) went to the store: history has references, and nothing near the values' size.
    expect(payloads.filter((p) => encodingOf(p) === CLAIM_CHECK_ENCODING).length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...payloads.map((p) => p.data?.byteLength ?? 0))).toBeLessThan(64 * 1024);

    const status = await runCli(['status', handle.workflowId, '--json'], harness.env);
    expect(status.exitCode, status.stderr).toBe(0);
    const shown = parseJson<{ stages: { id: string; result?: { outputs?: Record<string, string> } }[] }>(status);
    expect(shown.stages[0]!.result?.outputs).toEqual(BIG_REPORT.outputs);

    const client = await PipelineClient.connect({ env: harness.env });
    try {
      const report = await client.getRun(handle.workflowId).status();
      expect(report.state.stages[0]!.result?.outputs).toEqual(BIG_REPORT.outputs);
    } finally {
      await client.close();
    }

    // A client with another store cannot resolve the references, and is told which setting to fix.
    const elsewhere = await runCli(['status', handle.workflowId, '--json'], { ...harness.env, AGENT_PIPELINE_STORE: `file://${path.join(scratch, 'other')}` });
    expect(elsewhere.exitCode).not.toBe(0);
    expect(elsewhere.stderr).toContain('AGENT_PIPELINE_STORE');
    expect(elsewhere.stderr).toMatch(/runs\/[0-9a-f]{64}\/claims\/[0-9a-f]{64}/);
  });

  test('a 20 MB input file reaches its stage whole, by reference', { timeout: 240_000 }, async () => {
    const file = path.join(scratch, 'big-input.txt');
    await writeFile(file, `${'x'.repeat(20 * 1024 * 1024)}\n${INPUT_END}\n`);
    const pipeline = await harness.writePipeline(
      'claim-input',
      'name: claim-input\ninputs:\n  big: { required: true }\ndefaults: { backend: anthropic-api, model: haiku, maxTokens: 500, retries: 0 }\n' +
        // Every prompt lists the run's inputs: the template need not name it.
        'stages:\n  - id: read\n    prompt: Read the input.\n',
    );
    const client = await PipelineClient.connect({ env: harness.env });
    let runId: string;
    try {
      const run = await client.start(pipeline, { inputs: { big: { file } } });
      runId = run.id;
      const state = await run.result();
      expect(state.status).toBe('completed');
    } finally {
      await client.close();
    }
    const request = harness.modelServer.requests().find((r) => r.rule !== undefined && JSON.stringify(r.body).includes(INPUT_END));
    expect(request, 'the model got the end of the input').toBeDefined();
    const history = await harness.client.workflow.getHandle(runId!).fetchHistory();
    const started = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    expect(encodingOf(started)).toBe(CLAIM_CHECK_ENCODING);
    const payloads = payloadsIn(history.events);
    expect(Math.max(...payloads.map((p) => p.data?.byteLength ?? 0))).toBeLessThan(64 * 1024);
    // The client claimed the input under the run's keys; the worker that read it recorded the run there, so the
    // store's sweep deletes the input with the run once Temporal no longer keeps it.
    const key = Buffer.from(started.metadata![CLAIM_KEY_METADATA]!).toString();
    expect(key.startsWith(`${runKeyPrefix(runId!)}claims/`)).toBe(true);
    const record = JSON.parse(await readFile(path.join(scratch, 'store', runKeyPrefix(runId!), 'run.json'), 'utf8')) as { runId: string };
    expect(record.runId).toBe(runId!);
  });

  test("a run started with a reference to another run's claimed input is refused, and never runs that input", { timeout: 240_000 }, async () => {
    const file = path.join(scratch, 'their-input.txt');
    await writeFile(file, `${'t'.repeat(400 * 1024)}\n${THEIR_END}\n`);
    const pipeline = await harness.writePipeline('claim-theirs', readingPipeline('claim-theirs'));
    const client = await PipelineClient.connect({ env: harness.env });
    let theirs: string;
    try {
      const run = await client.start(pipeline, { inputs: { big: { file } } });
      theirs = run.id;
      expect((await run.result()).status).toBe('completed');
    } finally {
      await client.close();
    }
    // Their input is a reference in their history, its key in plain: whoever reads the namespace reads the key.
    const history = await harness.client.workflow.getHandle(theirs!).fetchHistory();
    const reference = history.events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    expect(encodingOf(reference)).toBe(CLAIM_CHECK_ENCODING);
    // A namespace client without the store starts a run of its own with that reference as its input.
    const mine = `claim-mine-${Math.random().toString(36).slice(2, 8)}`;
    const handle = await harness.client.workflow.start(PIPELINE_WORKFLOW_TYPE, { taskQueue: harness.taskQueue, workflowId: mine, args: [RawValue.fromPayload(reference)] });
    try {
      const outcome = await eventually(
        async () => {
          const events = (await handle.fetchHistory()).events ?? [];
          const failed = events.find((e) => e.workflowTaskFailedEventAttributes)?.workflowTaskFailedEventAttributes?.failure?.message;
          return failed ?? (events.some((e) => e.workflowExecutionCompletedEventAttributes) ? 'it ran their input' : undefined);
        },
        (seen) => seen !== undefined,
        90_000,
        'the run to fail its first workflow task, or to end',
      );
      expect(outcome).toMatch(/names runs\/[0-9a-f]{64}\/claims\/[0-9a-f]{64}, a payload another run keeps/);
      const mineRequests = harness.modelServer.requests().filter((r) => JSON.stringify(r.body).includes(`Run: ${mine}`));
      expect(mineRequests.length, 'requests of the run that named their input').toBe(0);
    } finally {
      await handle.terminate('seen').catch(() => undefined);
    }
  });

  test('a schedule whose input is claimed starts runs that read it (shared claims/, as each run has an id of its own)', { timeout: 240_000 }, async () => {
    const file = path.join(scratch, 'scheduled-input.txt');
    await writeFile(file, `${'s'.repeat(400 * 1024)}\n${SCHEDULED_END}\n`);
    const pipeline = await harness.writePipeline('claim-scheduled', readingPipeline('claim-scheduled'));
    const id = `claim-scheduled-${Math.random().toString(36).slice(2, 8)}`;
    const client = await PipelineClient.connect({ env: harness.env });
    try {
      await client.schedules.create(pipeline, { id, every: '1d', paused: true, inputs: { big: { file } } });
      await harness.client.schedule.getHandle(id).trigger();
      const described = await eventually(() => harness.client.schedule.getHandle(id).describe(), (d) => d.info.recentActions.length > 0, 60_000, 'the triggered run');
      const runId = described.info.recentActions[0]!.action.workflow.workflowId;
      const state = await client.getRun(runId).result();
      expect(state.status, JSON.stringify(state.stages)).toBe('completed');
      expect(harness.modelServer.requests().some((r) => JSON.stringify(r.body).includes(SCHEDULED_END))).toBe(true);
      const started = (await harness.client.workflow.getHandle(runId).fetchHistory()).events![0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
      expect(encodingOf(started)).toBe(CLAIM_CHECK_ENCODING);
      expect(Buffer.from(started.metadata![CLAIM_KEY_METADATA]!).toString()).toMatch(/^claims\/[0-9a-f]{64}$/);
    } finally {
      await harness.client.schedule.getHandle(id).delete().catch(() => undefined);
      await client.close();
    }
  });
});
