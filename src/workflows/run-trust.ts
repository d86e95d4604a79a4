import { ApplicationFailure, proxyLocalActivities } from '@temporalio/workflow';
import type { PipelineActivities } from '../contracts/activities.js';
import { DECISION_NOT_TRUSTED, RUN_NOT_TRUSTED, type RunTrustVerdict, type RunTrustCarryOver } from '../contracts/trust-types.js';

/**
 * Runs started before signed runs existed were never checked for a signature, and their decisions never needed one;
 * they replay and finish as they started.
 */
export const SIGNED_RUNS_PATCH = 'sign23-signed-runs';

/**
 * Longest a decision's signature may stay valid. A run remembers the nonce of every decision it took until the
 * signature expires, so this bounds that memory. @unit milliseconds
 */
export const MAX_DECISION_SIGNATURE_MS = 60 * 60 * 1000;
/** Decisions a run remembers at once (all within MAX_DECISION_SIGNATURE_MS); more are refused until some expire. */
const MAX_REMEMBERED_NONCES = 1000;

const { checkRunTrust, verifyDecision } = proxyLocalActivities<PipelineActivities>({
  // Pure and quick; the timeout only bounds a worker that is stuck.
  startToCloseTimeout: '1m',
  // A check that throws is a bug, not bad luck: the run fails with it instead of retrying for ever.
  retry: { maximumAttempts: 3 },
});


const notTrusted = (message: string): ApplicationFailure => ApplicationFailure.create({ type: DECISION_NOT_TRUSTED, message, nonRetryable: true });

/**
 * Checks that the worker may run this run (a signature by a trusted key, for this workflow id, not expired).
 * `onRefused` records the failure in the run's state first, so `status` (which queries it) says why it ended.
 * @throws ApplicationFailure RUN_NOT_TRUSTED, not retryable: the run fails at once
 */
export async function checkRunTrusted(input: unknown, onRefused: (error: { type: string; message: string }) => void): Promise<RunTrustVerdict> {
  const verdict = await checkRunTrust(input);
  if (verdict.refused) {
    onRefused({ type: RUN_NOT_TRUSTED, message: verdict.refused });
    throw ApplicationFailure.create({ type: RUN_NOT_TRUSTED, message: verdict.refused, nonRetryable: true });
  }
  return verdict;
}

/**
 * The run's trust: the verdict of its start (decided once, carried across continue-as-new) and the decisions' nonces.
 * With signed decisions, the update validators refuse an unsigned or reused decision at once (nothing is recorded),
 * and the handlers have the worker check the signature before the decision takes effect.
 */
export class RunTrust {
  private verdict?: RunTrustVerdict;
  private readonly usedNonces: Map<string, number>;

  constructor(carried: RunTrustCarryOver | undefined) {
    this.verdict = carried?.verdict;
    this.usedNonces = new Map(carried?.usedNonces);
  }

  /** The key that signed the run, when a worker with trusted keys verified its start. */
  signedBy(): string | undefined {
    return this.verdict?.signedBy;
  }

  /** Whether every decision for this run must be signed by a decision key. */
  get decisionsSigned(): boolean {
    return this.verdict?.decisionsSigned === true;
  }

  /** Records the verdict of the run's start. */
  accept(verdict: RunTrustVerdict): void {
    this.verdict = verdict;
  }

  /** For the update validators: refuses an unsigned decision, or one whose nonce was used, before it is recorded. */
  requireSignature(signature: unknown): void {
    if (!this.verdict?.decisionsSigned) return;
    if (signature === undefined || signature === null) {
      throw notTrusted('the decision is not signed, and this run accepts only signed decisions; set AGENT_PIPELINE_SIGNING_KEY to a key listed in the workers\' AGENT_PIPELINE_DECISION_KEYS');
    }
    const nonce = (signature as { nonce?: unknown }).nonce;
    if (typeof nonce === 'string' && this.usedNonces.has(nonce)) throw notTrusted('the decision\'s signature was used already; sign the decision again');
  }

  /**
   * For the update handlers, before the decision takes effect: has the worker check the signature (a local activity),
   * then remembers its nonce so that the same signed decision is never taken twice.
   * @throws ApplicationFailure DECISION_NOT_TRUSTED; the stage goes on waiting
   */
  async verify(decision: string, args: object): Promise<void> {
    if (!this.verdict?.decisionsSigned) return;
    const verdict = await verifyDecision(decision, args);
    if ('refused' in verdict) throw notTrusted(verdict.refused);
    const now = Date.now();
    if (verdict.expiresAt - now > MAX_DECISION_SIGNATURE_MS) throw notTrusted(`the decision's signature is valid for more than ${MAX_DECISION_SIGNATURE_MS / 60_000} minutes; sign it with a shorter expiry`);
    for (const [nonce, expiresAt] of this.usedNonces) if (expiresAt <= now) this.usedNonces.delete(nonce);
    if (this.usedNonces.has(verdict.nonce)) throw notTrusted('the decision\'s signature was used already; sign the decision again');
    if (this.usedNonces.size >= MAX_REMEMBERED_NONCES) throw notTrusted(`the run took ${MAX_REMEMBERED_NONCES} decisions within the hour; wait and decide again`);
    this.usedNonces.set(verdict.nonce, verdict.expiresAt);
  }

  /** What the next execution needs, or undefined for a run that was never checked (started before signing existed). */
  snapshot(): RunTrustCarryOver | undefined {
    return this.verdict && { verdict: this.verdict, usedNonces: [...this.usedNonces] };
  }
}
