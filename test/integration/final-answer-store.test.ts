import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepFinalAnswer } from '../../src/activities/run-stage/final-answer.js';
import { finalAnswerOf, readFinalAnswer } from '../../src/library/final-answer.js';
import { PipelineClient } from '../../src/library/pipeline-client.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import { openStore } from '../../src/store/open-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { startVersitygw, versitygwOrSkip, type Versitygw } from '../helpers/versitygw.js';
import { runCli } from './cli-helpers.js';
import { stageOf } from './workflow-helpers.js';

/*
 * Issue 31, full answers from any host: a worker with an s3:// store (versitygw) and encrypted history keeps a stage's
 * answer over 16 KB in the store, encrypted, under the run's keys; a client on another host (its own workspaces
 * folder, the same store and key settings) reads the whole text with `final-answer` and `RunHandle.finalAnswer`. A
 * client without the store setting is told which setting reaches it; an answer kept in the bookkeeping by a run
 * recorded before still reads; `prune` deletes the run's answers with its other objects, and then says so.
 */

const binary = await versitygwOrSkip('the final-answer store tests');

const report = (json: object): string => `\`\`\`json\n${JSON.stringify(json)}\n\`\`\``;
/** An answer well over the run state's 16 KB cap, with a last line to find. */
const LONG_ANSWER = `${Array.from({ length: 2000 }, (_, i) => `Line ${i + 1} of the long answer.`).join('\n')}\nThe end.`;
const ENCRYPTION_KEY = `answers:${randomBytes(32).toString('base64')}`;
const BUCKET = 'answers';

describe.skipIf(!binary)('a whole final answer in the object store', () => {
  let server: Versitygw;
  let harness: Harness;
  let otherHost: string;
  let runId: string;
  let state: RunState;
  let result: StageResult;
  /** A client's environment on another host: its own workspaces folder, the workers' store and key settings. */
  let clientEnv: NodeJS.ProcessEnv;

  beforeAll(async () => {
    server = await startVersitygw(binary!);
    await server.createBucket(BUCKET);
    otherHost = await mkdtemp(path.join(os.tmpdir(), 'final-answer-other-host-'));
    harness = await createHarness('answer-store', {
      scenario: { rules: [{ name: 'long', match: 'Stage: long ·', turns: [{ text: `${LONG_ANSWER}\n${report({ success: true, summary: 'Answered at length.', outputs: {} })}` }] }] },
      env: server.storeEnv(BUCKET, 'team'),
      encryptionKey: ENCRYPTION_KEY,
    });
    const handle = await harness.startYaml('long-answer', 'name: long-answer\ndefaults: { heartbeatTimeout: 1m }\nstages:\n  - { id: long, backend: claude-cli, model: haiku, allowedTools: [Read], prompt: Answer at length. }\n');
    runId = handle.workflowId;
    state = await harness.finish(handle);
    result = stageOf(state, 'long').result!;
    clientEnv = { ...harness.env, AGENT_PIPELINE_WORKSPACES: otherHost };
  }, 240_000);
  afterAll(async () => {
    await harness?.close();
    await server?.stop();
    if (otherHost) await rm(otherHost, { recursive: true, force: true });
  });

  it('keeps the answer in the store under the run\'s keys, encrypted, and a client on another host reads all of it', { timeout: 180_000 }, async () => {
    expect(state.status, JSON.stringify(state.error)).toBe('completed');
    expect(Buffer.byteLength(result.answer!)).toBeLessThan(17_000);
    expect(result.answerRef).toMatchObject({ store: true, bytes: Buffer.byteLength(LONG_ANSWER), key: expect.stringMatching(/^runs\/[0-9a-f]{64}\/answers\/[0-9a-f]{64}$/) });
    expect(result.answerRef!.key.startsWith(`${runKeyPrefix(runId)}answers/`)).toBe(true);
    // What the bucket holds is ciphertext: a reader of it without the key sees no line of the answer.
    const raw = await openStore(server.storeEnv(BUCKET, 'team'), { defaultDir: otherHost }).get(result.answerRef!.key, 1024 * 1024);
    expect(raw).toBeDefined();
    expect(Buffer.from(raw!).toString('latin1')).not.toContain('of the long answer');

    const cli = await runCli(['final-answer', runId, '--stage', 'long'], clientEnv);
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(cli.stdout).toBe(LONG_ANSWER); // execa drops the final newline the command prints
    const client = await PipelineClient.connect({ env: clientEnv });
    try {
      expect(await client.getRun(runId).finalAnswer('long')).toBe(LONG_ANSWER);
    } finally {
      await client.close();
    }
  });

  it('tells a client without the store setting which settings reach the answer (exit 2)', { timeout: 120_000 }, async () => {
    const withoutStore = Object.fromEntries(Object.entries(clientEnv).filter(([name]) => !name.startsWith('AGENT_PIPELINE_STORE')));
    const cli = await runCli(['final-answer', runId, '--stage', 'long'], withoutStore);
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toContain('[FINAL_ANSWER_NOT_FOUND]');
    expect(cli.stderr).toContain('AGENT_PIPELINE_STORE is not set here');
    expect(cli.stderr).toContain(result.answerRef!.key);
  });

  it('still reads an answer a run recorded before kept in its bookkeeping', { timeout: 60_000 }, async () => {
    // What a worker without a store keeps, and what every worker kept before answers went to the store.
    const transcriptPath = path.join(harness.workspacesRoot, result.transcript!);
    const oldRef = await keepFinalAnswer(LONG_ANSWER, { runId, transcriptPath, workspacesRoot: harness.workspacesRoot });
    expect(oldRef.store).toBeUndefined();
    expect(oldRef.key).toMatch(/^\.agent-pipeline\/runs\/.+\/attempt-1\.answer\.md$/);
    expect(await readFinalAnswer(oldRef, { workspacesRoot: harness.workspacesRoot })).toBe(LONG_ANSWER);
    const recordedBefore: RunState = { ...state, stages: state.stages.map((s) => (s.id === 'long' ? { ...s, result: { ...result, answerRef: oldRef } } : s)) };
    expect(await finalAnswerOf(recordedBefore, 'long', { env: harness.env, workspacesRoot: harness.workspacesRoot })).toBe(LONG_ANSWER);
    // From the other host, the old form still needs the workers' folder, and says so.
    await expect(finalAnswerOf(recordedBefore, 'long', { env: clientEnv })).rejects.toThrow(/recorded before answers were kept in the object store.*AGENT_PIPELINE_WORKSPACES/);
  });

  it('prune deletes the run\'s answers with its other objects, and final-answer then says the run was pruned', { timeout: 180_000 }, async () => {
    const pruned = await runCli(['prune', '--older-than', '0s', '--json'], harness.env);
    expect(pruned.exitCode, pruned.all).toBe(0);
    expect(JSON.parse(pruned.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ runId, removed: true })]));
    const left: string[] = [];
    for await (const key of openStore(server.storeEnv(BUCKET, 'team'), { defaultDir: otherHost }).list(runKeyPrefix(runId))) left.push(key);
    expect(left).toEqual([]);
    const cli = await runCli(['final-answer', runId, '--stage', 'long'], clientEnv);
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toContain('[FINAL_ANSWER_NOT_FOUND]');
    expect(cli.stderr).toMatch(/does not hold: the run was pruned/);
  });
});
