/*
 * The signatures runs and decisions carry, as the workflow sees them (see docs/security.md, "Signed runs and
 * decisions"). Types and names only: the workflow cannot check a signature itself (no `node:crypto` in workflow code);
 * the worker's local activities do (src/trust/).
 */

/** A signature carried beside what it signs: the run input's `signature`, a decision's `signature`. */
export interface TrustSignature {
  /** The id of the key that signed, as listed in the worker's AGENT_PIPELINE_TRUSTED_KEYS / _DECISION_KEYS. */
  keyId: string;
  /** Random, once per signature: a decision's nonce is accepted once per run. */
  nonce: string;
  /** After this the signature is refused. @unit milliseconds since the epoch */
  expiresAt: number;
  /**
   * A schedule's signed action: it holds for every run that schedule (its id and creation time) starts, as Temporal
   * reports it, never for a run started by hand (see trust/schedule-origin.ts).
   */
  schedule?: boolean;
  /** The Ed25519 signature, base64. */
  value: string;
}

/** A run the worker refused to run: unsigned, signed by a key it does not trust, for another run, or expired. */
export const RUN_NOT_TRUSTED = 'RUN_NOT_TRUSTED';
/** A decision the run refused: unsigned, signed by a key that may not decide, for another run, reused or expired. */
export const DECISION_NOT_TRUSTED = 'DECISION_NOT_TRUSTED';

/** What the run-trust check found, decided once per run and carried across continue-as-new. */
export interface RunTrustVerdict {
  /** Refused: why (the run fails with RUN_NOT_TRUSTED). */
  refused?: string;
  /** The key id that signed the run; absent when the worker trusts every run. */
  signedBy?: string;
  /** Whether every decision for this run must be signed by a decision key. */
  decisionsSigned: boolean;
}

/** What the decision check found: the signature's nonce and expiry, to remember, or why it was refused. */
export type DecisionVerdict = { refused: string } | { nonce: string; expiresAt: number; keyId: string };

/** What a run carries across continue-as-new of its trust: the verdict of its first execution and the nonces used. */
export interface RunTrustCarryOver {
  verdict: RunTrustVerdict;
  /** Nonces of the decisions taken, with when their signatures expire. @unit milliseconds since the epoch */
  usedNonces: [nonce: string, expiresAt: number][];
}
