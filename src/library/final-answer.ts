import { createHash } from 'node:crypto';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { readOwnFile } from '../activities/workspace/own-files.js';
import { ConfigError, withCliMessage } from '../errors.js';
import { OUTPUT_CAPS } from '../pipeline/output-caps.js';
import type { RunState } from '../pipeline/run-state.js';
import type { FinalAnswerRef } from '../pipeline/stage-result.js';
import { isFinalAnswerKey, runKeyPrefix } from '../store/run-keys.js';
import { STORE_VARIABLE } from '../store/store-settings.js';
import { openClientStore, type ClientStore, type ClientStoreSettings } from './client-store.js';
import { InvalidRequestError } from './errors.js';

/*
 * A stage's whole final answer. The run state keeps it cut at 16 KB; the worker keeps a cut one whole in the workers'
 * object store and the stage result names it (`answerRef`). Read here from the store of this host's own settings
 * (client-store.ts), so from any host that has them; answers of runs recorded before (a key in the workers' workspaces
 * folder) are still read from that folder, which this host must see.
 */

/** Options of `readFinalAnswer` and `RunHandle.finalAnswer`. */
export interface FinalAnswerOptions {
  /**
   * The workers' workspaces folder as mounted here: the default store's place when `AGENT_PIPELINE_STORE` is unset,
   * and where answers of runs recorded before the store are read. @default `AGENT_PIPELINE_WORKSPACES`, else `.agent-pipeline/workspaces`
   */
  workspacesRoot?: string;
  /** Where `AGENT_PIPELINE_STORE`, its settings and `AGENT_PIPELINE_ENCRYPTION_KEY` are read. @default `process.env` (the client's, for `RunHandle`) */
  env?: NodeJS.ProcessEnv;
}

/** Where answers of runs recorded before the store were kept, below the workspaces folder: the workers' own folder. */
const BOOKKEEPING_KEY = /^\.agent-pipeline\/runs\/[A-Za-z0-9._-]+\/stages\/[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+\/attempt-\d+\.answer\.md$/;
/** How an encrypted store object starts (store/encrypted-store.ts), and the most its header and tag add. @unit bytes */
const SEALED = Buffer.from('APS1');
const SEALED_OVERHEAD_BYTES = 4 + 1 + 255 + 12 + 16;

const notFound = (message: string, cause?: unknown): InvalidRequestError => new InvalidRequestError('FINAL_ANSWER_NOT_FOUND', `[FINAL_ANSWER_NOT_FOUND] ${message}`, { cause });

/**
 * The text `ref` names, checked against its size and hash: from this host's store, or, for a run recorded before, from
 * the workers' workspaces folder.
 * @throws InvalidRequestError `FINAL_ANSWER_NOT_FOUND` when the store (or folder) here does not hold it (naming the
 *   setting that would reach it), or what is there is not what the worker kept
 * @throws ConfigError `CONFIG_INVALID` when the store cannot be read with this host's settings (naming which)
 */
export async function readFinalAnswer(ref: FinalAnswerRef, options: FinalAnswerOptions = {}): Promise<string> {
  return readAnswerRef(ref, options, 'the answer');
}

async function readAnswerRef(ref: FinalAnswerRef, settings: ClientStoreSettings, what: string): Promise<string> {
  if (!ref.store) return readBookkeepingAnswer(ref, settings.workspacesRoot ?? openClientStore(settings).workspacesRoot);
  // The key comes from the run's state: only an answer's key is read, never another object of the store.
  if (!isFinalAnswerKey(ref.key)) throw notFound(`the run names ${what} as "${ref.key.slice(0, 200)}", which is not an answer's key in the store; it is not read`);
  const opened = openClientStore(settings);
  let data: Uint8Array | undefined;
  try {
    // Unencrypted here, an encrypted object is read (with its header and tag) so that its form can be named.
    data = await opened.store.get(ref.key, Math.min(ref.bytes, OUTPUT_CAPS.wholeAnswerBytes) + (opened.encrypted ? 0 : SEALED_OVERHEAD_BYTES));
  } catch (err) {
    throw storeProblem(err, ref, opened, what);
  }
  if (!data) throw missingFromStore(ref, opened, what);
  const bytes = Buffer.from(data);
  if (createHash('sha256').update(bytes).digest('hex') !== ref.sha256) {
    if (!opened.encrypted && bytes.subarray(0, SEALED.length).equals(SEALED)) {
      throw new ConfigError(`[CONFIG_INVALID] ${what} is encrypted in ${opened.store.description} and AGENT_PIPELINE_ENCRYPTION_KEY is not set here; set it to the keys the workers use`);
    }
    if (bytes.length > ref.bytes) throw tooLarge(ref, opened, what);
    throw notFound(`${ref.key} in ${opened.store.description} is not ${what} the worker kept (its sha256 differs): it was altered after the stage ended`);
  }
  return bytes.toString('utf8');
}

/** What a failed read of the store means to the person reading: a setting to fix, or an object that is not the answer. */
function storeProblem(err: unknown, ref: FinalAnswerRef, opened: ClientStore, what: string): Error {
  const name = (err as Error)?.name;
  const message = (err as Error)?.message ?? String(err);
  if (name === 'StoreObjectTooLargeError') return tooLarge(ref, opened, what, err);
  if (name === 'StoreDecryptionError' || name === 'StoreUnavailableError') {
    return new ConfigError(`[CONFIG_INVALID] ${what} is kept in the object store as ${ref.key}, and reading it failed: ${message}`, { cause: err });
  }
  return err as Error;
}

function tooLarge(ref: FinalAnswerRef, opened: ClientStore, what: string, cause?: unknown): InvalidRequestError {
  return notFound(`${ref.key} in ${opened.store.description} is larger than the ${ref.bytes} bytes of ${what} the worker kept: it was altered`, cause);
}

function missingFromStore(ref: FinalAnswerRef, opened: ClientStore, what: string): InvalidRequestError {
  const where = `${what} (${ref.bytes} bytes) is kept in the workers' object store as ${ref.key}`;
  if (!opened.configured) {
    return notFound(
      `${where}; ${STORE_VARIABLE} is not set here, and the default store in this host's workspaces folder (${opened.store.description}) does not hold it. ` +
        `Set ${STORE_VARIABLE} and its AGENT_PIPELINE_STORE_* settings (and AGENT_PIPELINE_ENCRYPTION_KEY when the workers encrypt) to what the workers use, ` +
        "or run this where the workers' workspaces folder is (the same AGENT_PIPELINE_WORKSPACES); a pruned run's answers are gone",
    );
  }
  return notFound(
    `${where}, which ${opened.store.description} does not hold: the run was pruned (\`agent-pipeline prune\` deletes a run's objects in the store, its answers with them), ` +
      `or ${STORE_VARIABLE} here names another store than the workers'; check ${STORE_VARIABLE} and AGENT_PIPELINE_STORE_ENDPOINT`,
  );
}

/** An answer of a run recorded before the store: a file in the workers' own folder under the workspaces root. */
async function readBookkeepingAnswer(ref: FinalAnswerRef, root: string): Promise<string> {
  // The key comes from the run's state: only a key of the workers' own folder, never a path leading elsewhere.
  if (!BOOKKEEPING_KEY.test(ref.key) || ref.key.split('/').includes('..')) {
    throw notFound(`the run names its answer as "${ref.key.slice(0, 200)}", which is not a key of the workers' own folder; it is not read`);
  }
  const realRoot = await realpath(root).catch(() => root);
  const file = path.join(realRoot, ...ref.key.split('/'));
  // Every folder on the way is the worker's own: a symlink among them (realpath differs) is not followed.
  const real = await realpath(file).catch(() => undefined);
  const data = real === file ? await readOwnFile(file, ref.bytes) : undefined;
  if (!data) {
    const problem = `the whole answer (${ref.bytes} bytes) of this run, recorded before answers were kept in the object store, is on the worker that ran the stage, at ${file}, which this host cannot read`;
    const where = "run this where the workers' workspaces folder is (a worker host, or one mounting it, with the same AGENT_PIPELINE_WORKSPACES";
    throw withCliMessage(notFound(`${problem}; ${where}, or the \`workspacesRoot\` option)`), notFound(`${problem}; ${where})`).message);
  }
  if (createHash('sha256').update(data).digest('hex') !== ref.sha256) throw notFound(`${file} is not the answer the worker kept (its sha256 differs); it was changed after the stage ended`);
  return data.toString('utf8');
}

/**
 * The whole final answer of `stageId` in `state`: the kept one when the state's `answer` was cut, else that answer.
 * @throws InvalidRequestError `INVALID_REQUEST` for a stage the run does not have; `FINAL_ANSWER_NOT_FOUND` when the
 *   stage has no answer (yet) or its kept text cannot be read here; ConfigError when the store cannot be read here
 */
export async function finalAnswerOf(state: RunState, stageId: string, settings: ClientStoreSettings = {}): Promise<string> {
  const stage = state.stages.find((s) => s.id === stageId);
  if (!stage) throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] run ${state.runId} has no stage "${stageId}"; its stages: ${state.stages.map((s) => s.id).join(', ')}`);
  const result = stage.result;
  const what = `the whole answer of stage ${stageId} of run ${state.runId}`;
  if (result?.answerRef) {
    // A run's state names only its own run's objects.
    if (result.answerRef.store && !result.answerRef.key.startsWith(runKeyPrefix(state.runId))) throw notFound(`the run names ${what} as ${result.answerRef.key}, which is another run's key; it is not read`);
    return readAnswerRef(result.answerRef, settings, what);
  }
  if (result?.answer === undefined) {
    throw notFound(`stage ${stageId} of run ${state.runId} has no answer (it is ${stage.status}); an answer is there once its agent has answered`);
  }
  return result.answer;
}
