import { parseSigningKey, SIGNING_KEY_VARIABLE, type SigningKey } from './keys.js';
import { signDecision, signRunInput, type ScheduleIdentity } from './signatures.js';
import type { TrustSignature } from '../contracts/trust-types.js';

/** How long a run's start signature holds: a worker must pick the run up within it. @unit milliseconds */
export const RUN_SIGNATURE_TTL_MS = 60 * 60 * 1000;
/**
 * How long a schedule's signed action holds: the schedule's runs are refused after it, until `schedule update`
 * signs the action again. @unit milliseconds
 */
export const SCHEDULE_SIGNATURE_TTL_MS = 365 * 24 * 60 * 60 * 1000;
/** How long a decision's signature holds: it is sent at once. @unit milliseconds */
export const DECISION_SIGNATURE_TTL_MS = 5 * 60 * 1000;

/** Expiries of what a {@link RunSigner} signs. */
export interface SignatureTtls {
  /** @unit milliseconds @default 1 hour */
  runMs?: number;
  /** @unit milliseconds @default 365 days */
  scheduleMs?: number;
}

/**
 * Signs what a client sends: run inputs (for one workflow id), schedule actions (for the runs of one schedule) and
 * decisions (for one run). Holds the private key; never prints or logs it.
 */
export class RunSigner {
  constructor(
    private readonly key: SigningKey,
    private readonly ttls: SignatureTtls = {},
  ) {}

  /** The id of the key that signs. */
  get keyId(): string {
    return this.key.keyId;
  }

  /** The input with its signature for `workflowId`. */
  signRun<T extends object>(input: T, workflowId: string): T & { signature: TrustSignature } {
    const expiresAt = Date.now() + (this.ttls.runMs ?? RUN_SIGNATURE_TTL_MS);
    return { ...input, signature: signRunInput(this.key, input, workflowId, expiresAt) };
  }

  /**
   * The input with its signature for every run of one schedule (its id and creation time, so the signature is worth
   * nothing to a schedule created again under that id).
   */
  signSchedule<T extends object>(input: T, schedule: ScheduleIdentity): T & { signature: TrustSignature } {
    const expiresAt = Date.now() + (this.ttls.scheduleMs ?? SCHEDULE_SIGNATURE_TTL_MS);
    return { ...input, signature: signRunInput(this.key, input, { schedule }, expiresAt) };
  }

  /** A decision's arguments with their signature for `runId`. */
  signDecision<T extends object>(runId: string, decision: string, args: T): T & { signature: TrustSignature } {
    return { ...args, signature: signDecision(this.key, runId, decision, args, Date.now() + DECISION_SIGNATURE_TTL_MS) };
  }
}

/**
 * The client's signer: from `signingKey` when given, else from AGENT_PIPELINE_SIGNING_KEY; none when neither is set.
 * @throws ConfigError when the key cannot be read
 */
export function signerFrom(signingKey: string | undefined, env: NodeJS.ProcessEnv, ttls?: SignatureTtls): RunSigner | undefined {
  const text = signingKey ?? env[SIGNING_KEY_VARIABLE];
  if (!text?.trim()) return undefined;
  return new RunSigner(parseSigningKey(text, signingKey === undefined ? SIGNING_KEY_VARIABLE : 'signingKey'), ttls);
}
