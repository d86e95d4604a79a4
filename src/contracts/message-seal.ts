/*
 * What a key holder's message says about itself, inside its encrypted payload. AES-GCM proves a key holder wrote a
 * payload, not which message it was written for: a namespace client that reads a lease workflow's history could copy
 * the encrypted argument of a worker's `acquireLease` (`{ holder, … }`) and send it, unchanged, as `releaseLease` or
 * `renewLease`, or to another key's workflow. So key holders name the message, the workflow and the time they send it,
 * and the workflows refuse a sealed message sent as another one, to another workflow, or later than MAX_SEAL_AGE_MS.
 *
 * Pure and free of imports: bundled into the workflow code.
 */

/** The field of a message that carries its seal. */
export const SEAL_FIELD = 'sealedFor';

/**
 * How long after its sending a sealed update is taken (the senders' clocks may differ a little, and an update sent while
 * every worker restarts waits for one). A signal is taken whatever its age: one that waited out a longer outage must
 * still give its lease back. @unit milliseconds
 */
export const MAX_SEAL_AGE_MS = 15 * 60_000;

export interface MessageSeal {
  /** The update or signal name. */
  message: string;
  workflowId: string;
  /** @unit milliseconds since the epoch */
  sentAt: number;
}

/** The message with its seal, as a key holder sends it. */
export function sealMessage<T extends object>(value: T, message: string, workflowId: string, now = Date.now()): T & { [SEAL_FIELD]: MessageSeal } {
  return { ...value, [SEAL_FIELD]: { message, workflowId, sentAt: now } };
}

/**
 * Why a message may not be taken as `message` by workflow `workflowId` at `now` (at any age without `now`), or
 * undefined. A message without a seal is taken (a worker of an earlier release sent it); one that was encrypted cannot
 * have its seal removed.
 */
export function findSealProblem(value: unknown, message: string, workflowId: string, now?: number): string | undefined {
  if (value === null || typeof value !== 'object' || !(SEAL_FIELD in value)) return undefined;
  const seal = (value as Record<string, unknown>)[SEAL_FIELD] as Partial<MessageSeal> | null;
  if (seal === null || typeof seal !== 'object') return 'its seal is not an object';
  if (seal.message !== message) return `it was sent as ${JSON.stringify(seal.message)}, not ${message}`;
  if (seal.workflowId !== workflowId) return 'it was sent to another workflow';
  if (now !== undefined && (typeof seal.sentAt !== 'number' || !(Math.abs(now - seal.sentAt) <= MAX_SEAL_AGE_MS))) return `it was sent more than ${MAX_SEAL_AGE_MS / 60_000} minutes from now`;
  return undefined;
}
