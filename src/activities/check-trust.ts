import { activityInfo } from '@temporalio/activity';
import { TRUSTED_KEYS_VARIABLE } from '../trust/keys.js';
import { findDecisionSignatureProblem, findRunSignatureProblem } from '../trust/signatures.js';
import { ALLOW_WORKER_FILES_VARIABLE, type WorkerTrust } from '../trust/worker-trust.js';
import type { DecisionVerdict, RunTrustVerdict } from '../contracts/trust-types.js';

/*
 * The worker's checks of signatures, run as local activities by the worker that runs the workflow task: the workflow
 * cannot check a signature itself (no `node:crypto` in workflow code), and the result, recorded in the history,
 * replays the same. The run (workflow) id is read here, from Temporal, never taken from what the caller sends.
 */

function workflowId(): string {
  return activityInfo().workflowExecution?.workflowId ?? '';
}

/** Whether this worker runs the run: its signature (with trusted keys), and whether it reads files from the worker. */
function checkRunTrust(trust: WorkerTrust, input: unknown): RunTrustVerdict {
  const decisionsSigned = trust.decisionKeys.size > 0;
  if (trust.runKeys.size === 0) return { decisionsSigned };
  const runId = workflowId();
  if (typeof input !== 'object' || input === null) return { refused: `run ${runId} is not trusted: its input is not an object`, decisionsSigned };
  const problem = findRunSignatureProblem(input, runId, trust.runKeys, TRUSTED_KEYS_VARIABLE, Date.now());
  if (problem) return { refused: `run ${runId} is not trusted: ${problem}`, decisionsSigned };
  if (!(input as { bundle?: unknown }).bundle && !trust.allowWorkerFiles) {
    return {
      refused: `run ${runId} is not trusted: it reads its files from the worker (the library's filesFromWorker, the command's --files-from-worker), which no signature covers; start it without, or set ${ALLOW_WORKER_FILES_VARIABLE}=1 on the worker`,
      decisionsSigned,
    };
  }
  return { signedBy: (input as { signature: { keyId: string } }).signature.keyId, decisionsSigned };
}

/** Whether a decision (an update's name and arguments) was signed for this run by a key that may decide. */
function verifyDecision(trust: WorkerTrust, decision: string, args: unknown): DecisionVerdict {
  if (typeof args !== 'object' || args === null) return { refused: `the ${decision} decision is not an object` };
  const problem = findDecisionSignatureProblem(workflowId(), decision, args, trust.decisionKeys, Date.now());
  if (problem) return { refused: `the decision is not trusted: ${problem}` };
  const { nonce, expiresAt, keyId } = (args as { signature: { nonce: string; expiresAt: number; keyId: string } }).signature;
  return { nonce, expiresAt, keyId };
}

/** The trust activities of a worker, closed over its key lists. */
export function createTrustActivities(trust: WorkerTrust) {
  return {
    checkRunTrust: async (input: unknown): Promise<RunTrustVerdict> => checkRunTrust(trust, input),
    verifyDecision: async (decision: string, args: unknown): Promise<DecisionVerdict> => verifyDecision(trust, decision, args),
  };
}
