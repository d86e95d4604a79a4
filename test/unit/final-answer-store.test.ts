import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keepFinalAnswer } from '../../src/activities/run-stage/final-answer.js';
import { parseEncryptionKeys } from '../../src/codec/encryption-key.js';
import { finalAnswerOf, readFinalAnswer } from '../../src/library/final-answer.js';
import type { RunState } from '../../src/pipeline/run-state.js';
import type { FinalAnswerRef } from '../../src/pipeline/stage-result.js';
import { openStore } from '../../src/store/open-store.js';
import { runKeyPrefix } from '../../src/store/run-keys.js';

/*
 * Issue 31, full answers from any host, on a real folder store (`file://`, the kind a worker opens from
 * AGENT_PIPELINE_STORE): the worker's keeping and the client's reading, with and without encryption, and what a run's
 * state may name. The s3:// store and a whole run are in test/integration/final-answer-store.test.ts.
 */

const KEY = `k1:${randomBytes(32).toString('base64')}`;
const ANSWER = 'The whole answer, far longer in a real run.\n';

let dir: string;
let env: NodeJS.ProcessEnv;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'final-answer-store-'));
  env = { AGENT_PIPELINE_STORE: `file://${path.join(dir, 'store')}`, AGENT_PIPELINE_WORKSPACES: path.join(dir, 'workspaces') };
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Keeps `text` as a worker with the store of `env` (and `key`) does. */
async function keep(runId: string, text: string, key?: string): Promise<FinalAnswerRef> {
  const store = openStore(env, { defaultDir: path.join(dir, 'unused'), encryptionKeys: key ? parseEncryptionKeys(key) : undefined });
  return keepFinalAnswer(text, { runId, store, transcriptPath: path.join(dir, 'attempt-1.jsonl'), workspacesRoot: dir });
}

/** A run state whose stage `s` names `ref`. */
const stateWith = (runId: string, ref: FinalAnswerRef): RunState =>
  ({ runId, stages: [{ id: 's', status: 'completed', result: { answer: 'cut', answerRef: ref } }] }) as unknown as RunState;

describe('a whole final answer in the object store', () => {
  it('is kept under the run\'s keys and read back from the store of the client\'s settings', async () => {
    const ref = await keep('run-1', ANSWER);
    expect(ref).toMatchObject({ store: true, bytes: Buffer.byteLength(ANSWER) });
    expect(ref.key.startsWith(`${runKeyPrefix('run-1')}answers/`)).toBe(true);
    expect(await readFinalAnswer(ref, { env })).toBe(ANSWER);
    expect(await finalAnswerOf(stateWith('run-1', ref), 's', { env })).toBe(ANSWER);
  });

  it('is encrypted when the worker encrypts: read with the key, refused without it naming AGENT_PIPELINE_ENCRYPTION_KEY', async () => {
    const ref = await keep('run-1', ANSWER, KEY);
    expect(await readFinalAnswer(ref, { env: { ...env, AGENT_PIPELINE_ENCRYPTION_KEY: KEY } })).toBe(ANSWER);
    await expect(readFinalAnswer(ref, { env })).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringContaining('AGENT_PIPELINE_ENCRYPTION_KEY is not set here') });
    const other = `k2:${randomBytes(32).toString('base64')}`;
    await expect(readFinalAnswer(ref, { env: { ...env, AGENT_PIPELINE_ENCRYPTION_KEY: other } })).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringContaining('"k1"') });
  });

  it('refuses what a run\'s state names outside its own answers, and an object changed since', async () => {
    const ref = await keep('run-1', ANSWER);
    await expect(finalAnswerOf(stateWith('run-2', ref), 's', { env })).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND', message: expect.stringContaining("another run's key") });
    const checkpoint = { ...ref, key: `${runKeyPrefix('run-1')}checkpoints/1/manifest.json` };
    await expect(finalAnswerOf(stateWith('run-1', checkpoint), 's', { env })).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND', message: expect.stringContaining("not an answer's key") });
    await openStore(env, { defaultDir: dir }).put(ref.key, Buffer.from('Another text of the same length, or so.....\n'));
    await expect(readFinalAnswer(ref, { env })).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND', message: expect.stringContaining('sha256 differs') });
    await openStore(env, { defaultDir: dir }).put(ref.key, Buffer.from(ANSWER.repeat(2)));
    await expect(readFinalAnswer(ref, { env })).rejects.toMatchObject({ code: 'FINAL_ANSWER_NOT_FOUND', message: expect.stringContaining('larger than') });
  });
});
