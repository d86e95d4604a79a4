import { createHash } from 'node:crypto';
import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { readOwnFile } from '../activities/workspace/own-files.js';
import { loadConfig } from '../config.js';
import type { RunState } from '../pipeline/run-state.js';
import type { FinalAnswerRef } from '../pipeline/stage-result.js';
import { InvalidRequestError } from './errors.js';

/*
 * A stage's whole final answer. The run state keeps it cut at 16 KB; the worker keeps a cut one whole in the run's
 * bookkeeping and the stage result names it (`answerRef`). Read here from the workers' workspaces folder, which this
 * host must see (a worker host, or one mounting the same folder); one function, `readFinalAnswer(ref)`, so that an
 * object store (AGENT_PIPELINE_STORE) can serve the same key to any host.
 */

/** Options of `readFinalAnswer` and `RunHandle.finalAnswer`. */
export interface FinalAnswerOptions {
  /** The workers' workspaces folder. @default `AGENT_PIPELINE_WORKSPACES`, else `.agent-pipeline/workspaces` */
  workspacesRoot?: string;
}

/** Where answers are kept, below the workspaces folder: the workers' own folder of run bookkeeping. */
const KEY_SHAPE = /^\.agent-pipeline\/runs\/[A-Za-z0-9._-]+\/stages\/[A-Za-z0-9._-]+\/[A-Za-z0-9._-]+\/attempt-\d+\.answer\.md$/;

/**
 * The text `ref` names, checked against its size and hash.
 * @throws InvalidRequestError `FINAL_ANSWER_NOT_FOUND` when this host cannot read it (naming where it looked, and the
 *   settings that would make it reachable), or when what is there is not what the worker kept
 */
export async function readFinalAnswer(ref: FinalAnswerRef, options: FinalAnswerOptions = {}): Promise<string> {
  const root = options.workspacesRoot ?? loadConfig().workspacesRoot;
  // The key comes from the run's state: only a key of the workers' own folder, never a path leading elsewhere.
  if (!KEY_SHAPE.test(ref.key) || ref.key.split('/').includes('..')) {
    throw new InvalidRequestError('FINAL_ANSWER_NOT_FOUND', `[FINAL_ANSWER_NOT_FOUND] the run names its answer as "${ref.key}", which is not a key of the workers' own folder; it is not read`);
  }
  const realRoot = await realpath(root).catch(() => root);
  const file = path.join(realRoot, ...ref.key.split('/'));
  // Every folder on the way is the worker's own: a symlink among them (realpath differs) is not followed.
  const real = await realpath(file).catch(() => undefined);
  const data = real === file ? await readOwnFile(file, ref.bytes) : undefined;
  if (!data) throw unreachable(ref, file);
  if (createHash('sha256').update(data).digest('hex') !== ref.sha256) {
    throw new InvalidRequestError('FINAL_ANSWER_NOT_FOUND', `[FINAL_ANSWER_NOT_FOUND] ${file} is not the answer the worker kept (its sha256 differs); it was changed after the stage ended`);
  }
  return data.toString('utf8');
}

function unreachable(ref: FinalAnswerRef, file: string): InvalidRequestError {
  return new InvalidRequestError(
    'FINAL_ANSWER_NOT_FOUND',
    `[FINAL_ANSWER_NOT_FOUND] the whole answer (${ref.bytes} bytes) is kept on the worker that ran the stage, at ${file}, which this host cannot read; ` +
      "run this where the workers' workspaces folder is (a worker host, or one mounting it, with the same AGENT_PIPELINE_WORKSPACES). " +
      'Reading it from any host needs the runs to keep their files in an object store (AGENT_PIPELINE_STORE), which this release does not do for answers yet',
  );
}

/**
 * The whole final answer of `stageId` in `state`: the kept file when the state's `answer` was cut, else that answer.
 * @throws InvalidRequestError `INVALID_REQUEST` for a stage the run does not have; `FINAL_ANSWER_NOT_FOUND` when the
 *   stage has no answer (yet) or its kept file cannot be read here
 */
export async function finalAnswerOf(state: RunState, stageId: string, options: FinalAnswerOptions = {}): Promise<string> {
  const stage = state.stages.find((s) => s.id === stageId);
  if (!stage) throw new InvalidRequestError('INVALID_REQUEST', `[INVALID_REQUEST] run ${state.runId} has no stage "${stageId}"; its stages: ${state.stages.map((s) => s.id).join(', ')}`);
  const result = stage.result;
  if (result?.answerRef) return readFinalAnswer(result.answerRef, options);
  if (result?.answer === undefined) {
    throw new InvalidRequestError('FINAL_ANSWER_NOT_FOUND', `[FINAL_ANSWER_NOT_FOUND] stage ${stageId} of run ${state.runId} has no answer (it is ${stage.status}); an answer is there once its agent has answered`);
  }
  return result.answer;
}
