import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import type { AgentPromptDecision } from '../../pipeline/agent-prompt.js';
import { agentPromptUpdate } from '../../contracts/messages.js';
import type { AskPerson } from '../backends/claude-cli/control-protocol.js';
import { currentRedaction } from '../secrets.js';
import { promptDigest } from '../../trust/prompt-digest.js';

/**
 * How an attempt asks a person mid-turn (docs/permission-prompts.md). An activity cannot receive signals, so it asks
 * its run: the `agentPrompt` update, sent from the activity's own client, opens the wait in the workflow and completes
 * with the decision. The client long-polls the update's outcome for as long as the wait lasts; the attempt heartbeats
 * meanwhile (its agent process is quiet, not dead). Taken while the activity runs, so it keeps the attempt's context.
 * The update carries the attempt's token (`promptToken` of its input), without which the run refuses the ask, a fresh
 * id the run takes once, and the digest of the request, which decisions may name (and signed ones must).
 */
export function askPersonThroughRun(stageId: string, token: string | undefined): AskPerson {
  const context = Context.current();
  const redact = currentRedaction();
  const { workflowExecution, attempt } = context.info;
  if (!workflowExecution) return () => Promise.reject(new Error('the attempt belongs to no workflow run'));
  const handle = context.client.workflow.getHandle(workflowExecution.workflowId, workflowExecution.runId);
  return async (ask) => {
    // The agent's input may quote a secret the worker holds: history and `status` get it redacted.
    const redacted = redact({ ...ask, stage: stageId, attempt });
    const request = { ...redacted, digest: promptDigest(redacted), askId: randomUUID(), ...(token === undefined ? {} : { token }) };
    const decided = handle.executeUpdate(agentPromptUpdate, { args: [request] });
    return await untilAborted(decided, context.cancellationSignal);
  };
}

/** The decision, unless the attempt is cancelled first (then the cancellation ends the wait). */
function untilAborted(decided: Promise<AgentPromptDecision>, signal: AbortSignal): Promise<AgentPromptDecision> {
  if (signal.aborted) return Promise.reject(signal.reason instanceof Error ? signal.reason : new Error('the attempt was cancelled'));
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason instanceof Error ? signal.reason : new Error('the attempt was cancelled'));
    signal.addEventListener('abort', onAbort, { once: true });
    decided.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
