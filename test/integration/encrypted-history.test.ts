import { Client, Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunJson } from '../../src/cli/json.js';
import { startCodecServer, type CodecServer } from '../../src/codec/codec-server.js';
import { payloadCodecsFor, workerDataConverter } from '../../src/codec/data-converter.js';
import { startDevServer, type DevServer } from '../../src/dev/dev-server.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import type { RunListItem } from '../../src/library/list-runs.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { TEST_SANDBOX_MODE } from '../helpers/sandbox-host.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { expectRunsReplay } from '../helpers/replay-check.js';
import { installQuietRuntime } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { CHROMIUM, hasSystemPackage } from '../helpers/system-package.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import { eventually, parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { pickFreePort } from '../../src/dev/dev-server-ports.js';

/*
 * Issue 23, encrypted history: with AGENT_PIPELINE_ENCRYPTION_KEY on the worker and the CLI, a run's history holds no
 * plain text of its prompt, inputs, answer, result, memo or failure messages (read with the plain `temporal` CLI,
 * which has no codec), while `status` and `list` show them decoded, the Web UI shows them through the codec server,
 * and a run started under an old key finishes after a new key is put in front of it.
 */

const ENCRYPTED_BUNDLE = path.join(PROJECT_ROOT, 'dist', 'workflow-bundle-encrypted.js');
const TASK_QUEUE = 'encrypted-history';
const key = (id: string): string => `${id}:${randomBytes(32).toString('base64')}`;
const OLD_KEY = key('old');
const NEW_KEY = key('new');

const MARKER = {
  prompt: 'PROMPT-MARKER-3b1e0c',
  input: 'INPUT-MARKER-91d2aa',
  answer: 'ANSWER-MARKER-c44f17',
  result: 'RESULT-MARKER-5e77b0',
  failure: 'FAILURE-MARKER-08ad3e',
};
const report = (success: boolean, summary: string, error?: string): string =>
  `\`\`\`json\n${JSON.stringify({ success, summary, outputs: {}, ...(error ? { error } : {}) })}\n\`\`\``;

const PIPELINE = [
  'name: secret-notes',
  'inputs: { topic: { required: true } }',
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
  'stages:',
  '  - id: ask',
  `    prompt: "${MARKER.prompt}: write notes on {{inputs.topic}}."`,
].join('\n');
const FAILING = [
  'name: secret-failure',
  'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
  'stages:',
  '  - id: broken',
  '    prompt: Try the impossible.',
].join('\n');

/** Every base64 run of 16+ characters in `text`, decoded: the temporal CLI may print payload data so. */
function decodedBase64(text: string): string {
  return [...text.matchAll(/[A-Za-z0-9+/]{16,}={0,2}/g)].map((m) => Buffer.from(m[0], 'base64').toString('utf8')).join('\n');
}


describe('encrypted history', () => {
  let dir: string;
  let server: DevServer;
  let codecServer: CodecServer;
  let model: ModelServer;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  let temporal: string;
  let pipelineFile: string;
  let failingFile: string;
  let baseEnv: NodeJS.ProcessEnv;
  const envWith = (encryptionKey: string): NodeJS.ProcessEnv => ({ ...baseEnv, AGENT_PIPELINE_ENCRYPTION_KEY: encryptionKey });

  async function startWorker(encryptionKey: string): Promise<void> {
    worker = await createPipelineWorker({ env: envWith(encryptionKey), taskQueue: TASK_QUEUE, workflowBundlePath: ENCRYPTED_BUNDLE });
    running = worker.run();
  }
  async function stopWorker(): Promise<void> {
    await stopTestWorker('the encrypting worker', worker, running);
    worker = undefined;
  }
  const status = async (runId: string, encryptionKey = OLD_KEY): Promise<RunJson> => parseJson<RunJson>(await runCli(['status', runId, '--json'], envWith(encryptionKey)));
  /** A library client per key, in this process: for the waits and starts before the commands a test is about (a command costs a Node process). */
  const readers = new Map<string, Promise<PipelineClient>>();
  const reader = (encryptionKey: string): Promise<PipelineClient> => {
    let client = readers.get(encryptionKey);
    if (!client) readers.set(encryptionKey, (client = PipelineClient.connect({ env: envWith(encryptionKey) })));
    return client;
  };
  /** Waits on the run's state, decoded with `encryptionKey`, read in this process (polling `status` started a Node process each time). */
  const stateUntil = (runId: string, accept: (state: RunState) => boolean, what: string, encryptionKey = OLD_KEY): Promise<RunState> =>
    eventually(async () => (await (await reader(encryptionKey)).getRun(runId).status()).state, accept, 90_000, what);
  /** The run's whole history as the plain `temporal` CLI prints it, with no codec. */
  const plainHistory = async (runId: string): Promise<string> =>
    (await execa(temporal, ['workflow', 'show', '--workflow-id', runId, '--address', server.address, '--namespace', 'default', '--output', 'json'])).stdout;
  const describePlain = async (runId: string): Promise<string> =>
    (await execa(temporal, ['workflow', 'describe', '--workflow-id', runId, '--address', server.address, '--namespace', 'default', '--output', 'json'])).stdout;

  beforeAll(async () => {
    installQuietRuntime();
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-encrypted-'));
    temporal = await findTemporalCli();
    const uiPort = await pickFreePort();
    const uiOrigin = `http://127.0.0.1:${uiPort}`;
    // The codec server has the keys the person has: the old one first until rotation (both decrypt either way).
    codecServer = await startCodecServer({ codecs: payloadCodecsFor(`${OLD_KEY},${NEW_KEY}`), port: 0, origin: uiOrigin });
    server = await startDevServer({ port: 'auto', uiPort, dbFile: null, logFile: path.join(dir, 'server.log'), uiCodecEndpoint: codecServer.url });
    model = await startModelServer({
      log: () => {},
      scenario: {
        rules: [
          { match: 'Stage: ask ·', turns: [{ text: 'BLOCKED: Which audience are the notes for?' }, { text: report(true, `Wrote the notes: ${MARKER.result}.`) }] },
          { match: 'Stage: broken ·', repeatLastTurn: true, turns: [{ text: report(false, 'It could not be done.', `the disk said ${MARKER.failure}`) }] },
          { match: 'Stage: later ·', turns: [{ text: report(true, 'Finished after the rotation.') }] },
        ],
      },
    });
    baseEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      AGENT_PIPELINE_TASK_QUEUE: TASK_QUEUE,
      AGENT_PIPELINE_WORKSPACES: path.join(dir, 'workspaces'),
      AGENT_PIPELINE_SANDBOX: TEST_SANDBOX_MODE,
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: 'sk-test-encrypted',
    };
    pipelineFile = path.join(dir, 'notes.yaml');
    failingFile = path.join(dir, 'failing.yaml');
    await writeFile(pipelineFile, PIPELINE);
    await writeFile(failingFile, FAILING);
    await startWorker(OLD_KEY);
  }, 180_000);

  afterAll(async () => {
    for (const client of readers.values()) await (await client.catch(() => undefined))?.close();
    await stopWorker();
    // The worker cached its runs: each history is replayed once here, with both keys (replay-check.ts).
    if (server) {
      const connection = await Connection.connect({ address: server.address });
      try {
        const dataConverter = workerDataConverter(payloadCodecsFor(`${NEW_KEY},${OLD_KEY}`));
        await expectRunsReplay(new Client({ connection }), TASK_QUEUE, { bundlePath: ENCRYPTED_BUNDLE, dataConverter });
      } finally {
        await connection.close();
      }
    }
    await model?.close();
    await codecServer?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  let runId: string;

  test('a run with a marker in its prompt, input, answer and result: none of them, nor its memo, is plain in history; status and list show them', { timeout: 240_000 }, async () => {
    const env = envWith(OLD_KEY);
    const started = await runCli(['start', pipelineFile, '--input', `topic=${MARKER.input}`, '--json'], env);
    runId = parseJson<{ runId: string }>(started).runId;
    await stateUntil(runId, (state) => state.stages.some((s) => s.id === 'ask' && s.waitingFor?.kind === 'answer'), 'ask waiting for an answer');
    const answered = await runCli(['answer', runId, '--stage', 'ask', `For ${MARKER.answer} readers.`], env);
    expect(answered.exitCode, answered.all).toBe(0);
    await stateUntil(runId, (state) => state.status === 'completed', 'the run completed');
    // Visibility is eventually consistent: waited for in this process before `list` reads it.
    await eventually(async () => (await reader(OLD_KEY)).list({ pipeline: 'secret-notes' }), (runs) => runs.some((r) => r.runId === runId && r.status === 'completed'), 30_000, 'the run listed as completed');
    // Back to back in one process (a command costs a Node process): status as JSON and for people, and list. `status`
    // as a user runs it, one command a process, reads encrypted runs below (without the key, and in the rotation test).
    // Filtered by pipeline: the dev server is shared by every test file, whose encrypted runs use other keys.
    const [doneJson, human, listJson] = await runCliCommands([['status', runId, '--json'], ['status', runId], ['list', '--json', '--pipeline', 'secret-notes']], env);
    const done = parseJson<RunJson>(doneJson);

    // Decoded for whoever holds the key: the input, the result, the bundle from the memo.
    expect(done.status).toBe('completed');
    expect(done.inputs).toEqual({ topic: MARKER.input });
    expect(done.stages[0]!.result?.summary).toContain(MARKER.result);
    expect(done.bundle?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(human.exitCode, human.all).toBe(0);
    expect(human.stdout).toContain(MARKER.result);
    const listed = parseJson<{ runs: RunListItem[] }>(listJson);
    expect(listed.runs.find((item) => item.runId === runId)).toMatchObject({ pipeline: 'secret-notes', status: 'completed' });

    // The library with the key given as an option (an empty environment otherwise) reads the same.
    const library = await PipelineClient.connect({ address: server.address, env: {}, encryptionKey: OLD_KEY });
    try {
      const report = await library.getRun(runId).status();
      expect(report.state.inputs).toEqual({ topic: MARKER.input });
      expect((await library.list()).map((item) => item.runId)).toContain(runId);
    } finally {
      await library.close();
    }

    // Without the key a client says what to set, not a decoding error.
    const keyless = await runCli(['status', runId, '--json'], baseEnv);
    expect(keyless.exitCode).not.toBe(0);
    expect(keyless.stderr).toMatch(/\[CONFIG_INVALID\] the run's payloads are encrypted and AGENT_PIPELINE_ENCRYPTION_KEY is not set here/);

    // The agent saw the prompt, the input and the answer in plain text: the worker decrypted them.
    const requests = JSON.stringify(model.requests());
    for (const marker of [MARKER.prompt, MARKER.input, MARKER.answer]) expect(requests).toContain(marker);

    // History and description as anyone with namespace access reads them: no marker, no bundle hash (the memo).
    const history = await plainHistory(runId);
    const description = await describePlain(runId);
    // The CLI prints payload bytes in base64: decoded, the encryption's own metadata shows, so a plain marker would too.
    expect(decodedBase64(history)).toContain('binary/encrypted');
    for (const text of [history, decodedBase64(history), description, decodedBase64(description)]) {
      for (const marker of [...Object.values(MARKER), done.bundle!.hash]) expect(text).not.toContain(marker);
    }
    // The plain `temporal` CLI does show plain payloads: the same check finds the workflow type, which is not encrypted.
    expect(history).toContain('pipelineWorkflow');
  });

  test("a failure's message is encoded too: history shows no marker, status shows it", { timeout: 180_000 }, async () => {
    // Started and waited for in this process: `start` as a user runs it is the first test's (a command costs a Node process).
    const { id: failed } = await (await reader(OLD_KEY)).start(failingFile);
    await stateUntil(failed, (state) => state.status === 'failed', 'the run failed');
    const run = await status(failed);
    expect(run.status).toBe('failed');
    expect(JSON.stringify(run.stages[0])).toContain(MARKER.failure);
    const history = await plainHistory(failed);
    expect(history).toContain('Encoded failure');
    expect(decodedBase64(history)).toContain('binary/encrypted');
    expect(history).not.toContain(MARKER.failure);
    expect(decodedBase64(history)).not.toContain(MARKER.failure);
  });

  test.skipIf(!hasSystemPackage(CHROMIUM))('the Web UI, through the codec server, shows the input and the result in plain text', { timeout: 180_000 }, async () => {
    const browser: Browser = await chromium.launch({
      executablePath: CHROMIUM.file!,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page: Page = await browser.newPage({ viewport: { width: 1400, height: 1600 } });
      await page.goto(`${server.uiUrl}/namespaces/default/workflows/${runId}`);
      await expectPageShows(page, MARKER.input);
      await expectPageShows(page, MARKER.result);
    } finally {
      await browser.close();
    }
  });

  test('key rotation: a run started under the old key finishes after the worker restarts with "new,old"', { timeout: 240_000 }, async () => {
    await writeFile(path.join(dir, 'rotating.yaml'), PIPELINE.replace('name: secret-notes', 'name: rotating'));
    const oldEnv = envWith(OLD_KEY);
    // Started and waited for in this process: `start` as a user runs it is the first test's (a command costs a Node process).
    const { id } = await (await reader(OLD_KEY)).start(path.join(dir, 'rotating.yaml'), { inputs: { topic: 'rotation' } });
    await stateUntil(id, (state) => state.stages.some((s) => s.id === 'ask' && s.waitingFor?.kind === 'answer'), 'ask waiting for an answer');

    await stopWorker();
    const rotated = `${NEW_KEY},${OLD_KEY}`;
    // With no worker, status rebuilds the waiting run from its history, written under the old key.
    const fromHistory = await status(id, rotated);
    expect(fromHistory.inputs).toEqual({ topic: 'rotation' });
    await startWorker(rotated);
    // Answered through the library holding "new,old" (`answer` as a user runs it is the first test's; `status` above read
    // the same key list as a user gives it): a command costs a Node process.
    await (await reader(rotated)).getRun(id).answer('Anyone.', { stage: 'ask' });
    const done = await stateUntil(id, (state) => state.status === 'completed', 'the rotated run completed', rotated);
    expect(done.stages[0]!.result?.summary).toContain(MARKER.result);
    // The answer went in under the new key: payloads of both keys sit in one history.
    const history = await plainHistory(id);
    const keyIds = [...history.matchAll(/"encryption-key-id":\s*"([^"]+)"/g)].map((m) => Buffer.from(m[1]!, 'base64').toString());
    expect(new Set(keyIds)).toEqual(new Set(['old', 'new']));
    // A client with only the old key cannot read what the new key wrote, and says which key is missing.
    const oldOnly = await runCli(['status', id, '--json'], oldEnv);
    expect(oldOnly.exitCode).not.toBe(0);
    expect(oldOnly.stderr).toMatch(/\[CONFIG_INVALID\] a payload is encrypted with key "new", which AGENT_PIPELINE_ENCRYPTION_KEY does not hold/);
  });
});

/** Waits until `text` shows anywhere on the page (the UI renders payloads once the codec server answered). */
async function expectPageShows(page: Page, text: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const html = await page.content().catch(() => '');
    if (html.includes(text)) return;
    await page.waitForTimeout(500);
  }
  const shot = path.join(tmpdir(), 'agent-pipeline-encrypted-webui.png');
  await page.screenshot({ path: shot, fullPage: true });
  throw new Error(`the page ${page.url()} did not show ${text} within ${timeoutMs} ms; see ${shot}`);
}
