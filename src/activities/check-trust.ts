import { activityInfo, Context } from '@temporalio/activity';
import { TRUSTED_KEYS_VARIABLE } from '../trust/keys.js';
import { findScheduleOrigin } from '../trust/schedule-origin.js';
import { findDecisionSignatureProblem, findRunKeyProblem, findRunSignatureProblem, hasScheduleSignature, type RunScope } from '../trust/signatures.js';
import { ALLOW_WORKER_FILES_VARIABLE, type WorkerTrust } from '../trust/worker-trust.js';
import { findWorkerFilesProblem, type PipelineDirs } from './prompt/worker-files.js';
import type { DecisionVerdict, RunTrustVerdict } from '../contracts/trust-types.js';

/*
 * The worker's checks of signatures, run as local activities by the worker that runs the workflow task: the workflow
 * cannot check a signature itself (no `node:crypto` in workflow code), and the result, recorded in the history,
 * replays the same. The run (workflow) id is read here, from Temporal, never taken from what the caller sends.
 */

function workflowId(): string {
  return activityInfo().workflowExecution?.workflowId ?? '';
}

/**
 * What the run's signature must be for: its workflow id, or for a schedule's signed action the schedule that started
 * it, as Temporal reports it (see trust/schedule-origin.ts); a string says why the run is no schedule's action.
 */
async function runScope(input: object, runId: string): Promise<RunScope | string> {
  if (!hasScheduleSignature(input)) return { workflowId: runId };
  const context = Context.current();
  // The check runs in the run's first execution, whose run id is the one the schedule recorded.
  const execution = { workflowId: runId, runId: activityInfo().workflowExecution?.runId ?? '' };
  const origin = await findScheduleOrigin(context.client, execution, { sleep: (ms) => context.sleep(ms) });
  return 'refused' in origin ? origin.refused : { schedule: origin };
}

/** Whether this worker runs the run: its signature (with trusted keys), and whether it reads files from the worker. */
async function checkRunTrust(trust: WorkerTrust, pipelineDirs: PipelineDirs, input: unknown): Promise<RunTrustVerdict> {
  const decisionsSigned = trust.decisionKeys.size > 0;
  // Signed or not: a run that carries no files reads them from the worker's disk, only in a folder its operator lists.
  const workerFiles = await checkWorkerFiles(pipelineDirs, input);
  if (workerFiles) return { refused: workerFiles, decisionsSigned };
  if (trust.runKeys.size === 0) return { decisionsSigned };
  const runId = workflowId();
  if (typeof input !== 'object' || input === null) return { refused: `run ${runId} is not trusted: its input is not an object`, decisionsSigned };
  // A signature no listed key made is refused before the server is asked which schedule started the run.
  const keyProblem = findRunKeyProblem(input, trust.runKeys, TRUSTED_KEYS_VARIABLE, Date.now());
  if (keyProblem) return { refused: `run ${runId} is not trusted: ${keyProblem}`, decisionsSigned };
  const scope = await runScope(input, runId);
  if (typeof scope === 'string') return { refused: `run ${runId} is not trusted: ${scope}`, decisionsSigned };
  const problem = findRunSignatureProblem(input, scope, trust.runKeys, TRUSTED_KEYS_VARIABLE, Date.now());
  if (problem) return { refused: `run ${runId} is not trusted: ${problem}`, decisionsSigned };
  if (!(input as { bundle?: unknown }).bundle && !trust.allowWorkerFiles) {
    return {
      refused: `run ${runId} is not trusted: it reads its files from the worker (the library's filesFromWorker, the command's --files-from-worker), which no signature covers; start it without, or set ${ALLOW_WORKER_FILES_VARIABLE}=1 on the worker`,
      decisionsSigned,
    };
  }
  return { signedBy: (input as { signature: { keyId: string } }).signature.keyId, decisionsSigned };
}

/**
 * Why a fork may not take over the stages of run `runId` (its start `input`) on this worker, or undefined: with trusted
 * keys, the source must have been signed by one of them, for that run or as a schedule's action. Its signature's
 * expiry is not checked: it was checked when the source started, and a finished run's signature has expired since.
 */
export function findForkSourceProblem(trust: WorkerTrust, input: object, runId: string): string | undefined {
  if (trust.runKeys.size === 0) return undefined;
  const expiresAt = (input as { signature?: { expiresAt?: unknown } }).signature?.expiresAt;
  const then = typeof expiresAt === 'number' ? expiresAt - 1 : Date.now();
  const problem = hasScheduleSignature(input)
    ? findRunKeyProblem(input, trust.runKeys, TRUSTED_KEYS_VARIABLE, then)
    : findRunSignatureProblem(input, { workflowId: runId }, trust.runKeys, TRUSTED_KEYS_VARIABLE, then);
  return problem && `run ${runId} is not trusted on this worker: ${problem}`;
}

/** Why the run may not have its files read from the worker's disk, for a run that carries none (its `baseDir` outside the listed folders). */
async function checkWorkerFiles(pipelineDirs: PipelineDirs, input: unknown): Promise<string | undefined> {
  if (typeof input !== 'object' || input === null || (input as { bundle?: unknown }).bundle) return undefined;
  const { baseDir } = input as { baseDir?: unknown };
  // A run without a baseDir string fails the workflow's input check, which names the field.
  if (typeof baseDir !== 'string' || baseDir === '') return undefined;
  const problem = await findWorkerFilesProblem(pipelineDirs, baseDir);
  return problem && `run ${workflowId()} is refused: ${problem.message}; ${problem.hint}`;
}

/** Whether a decision (an update's name and arguments) was signed for this run by a key that may decide. */
function verifyDecision(trust: WorkerTrust, decision: string, args: unknown): DecisionVerdict {
  if (typeof args !== 'object' || args === null) return { refused: `the ${decision} decision is not an object` };
  const problem = findDecisionSignatureProblem(workflowId(), decision, args, trust.decisionKeys, Date.now());
  if (problem) return { refused: `the decision is not trusted: ${problem}` };
  const { nonce, expiresAt, keyId } = (args as { signature: { nonce: string; expiresAt: number; keyId: string } }).signature;
  return { nonce, expiresAt, keyId };
}

/** The trust activities of a worker, closed over its key lists and the folders it reads pipelines from. */
export function createTrustActivities(trust: WorkerTrust, pipelineDirs: PipelineDirs = []) {
  return {
    checkRunTrust: (input: unknown): Promise<RunTrustVerdict> => checkRunTrust(trust, pipelineDirs, input),
    verifyDecision: async (decision: string, args: unknown): Promise<DecisionVerdict> => verifyDecision(trust, decision, args),
  };
}
