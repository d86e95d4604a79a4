import { ApplicationFailure, workflowInfo } from '@temporalio/workflow';
import { findSealProblem } from '../contracts/message-seal.js';
import { cameUnencrypted, MESSAGE_NOT_AUTHENTICATED } from '../contracts/payload-origin.js';

/**
 * For the validators of messages only the deployment's workers send (leases, the API-key limiter, an attempt's
 * mid-turn prompt): refuses one that arrived unencrypted on a worker that encrypts, so a namespace client without the
 * key cannot take, give back or renew a lease, pause a key or answer for an agent. Refused in the validator, the
 * message leaves nothing in the history. Without encryption it lets everything through: nothing tells a worker's
 * message from a stranger's there (docs/security.md). With `name`, a sealed message must have been sent as that
 * message to this workflow (an update lately, a signal at any time): a key holder's payload copied from history is
 * not another message (contracts/message-seal.ts).
 * @throws ApplicationFailure MESSAGE_NOT_AUTHENTICATED, not retryable
 */
export function requireKeyHolder(message: unknown, what: string, name?: string, kind: 'update' | 'signal' = 'update'): void {
  if (!cameUnencrypted(message)) {
    const problem = name === undefined ? undefined : findSealProblem(message, name, workflowInfo().workflowId, kind === 'update' ? Date.now() : undefined);
    if (problem) throw ApplicationFailure.create({ type: MESSAGE_NOT_AUTHENTICATED, message: `${what} refused: ${problem}`, nonRetryable: true });
    return;
  }
  throw ApplicationFailure.create({
    type: MESSAGE_NOT_AUTHENTICATED,
    message: `${what} refused: it arrived unencrypted, and this deployment encrypts its payloads (AGENT_PIPELINE_ENCRYPTION_KEY), so only a holder of the key (its workers) may send it`,
    nonRetryable: true,
  });
}
