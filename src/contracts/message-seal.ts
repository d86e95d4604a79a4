/*
 * What a key holder's message says about itself, inside its encrypted payload. AES-GCM proves a key holder wrote a
 * payload, not which message it was written for: a namespace client that reads a lease workflow's history could copy
 * the encrypted argument of a worker's `acquireLease` (`{ holder, … }`) and send it, unchanged, as `releaseLease` or
 * `renewLease`, or to another key's workflow. So key holders name the message, the workflow and the time they send it,
 * and the workflows refuse a sealed message sent as another one, to another workflow, or later than MAX_SEAL_AGE_MS.
 *
 * The same message could still be sent again, unchanged, to the same workflow: a renewal kept a dead holder's lease,
 * an old release gave back the same holder's later lease. So a workflow remembers, per sender, when the newest sealed
 * message it took was sent, and refuses one sent no later (MESSAGE_REPLAYED); senders seal with a clock that never
 * gives one time twice nor goes back (`sealClock`), so each of their messages is newer than the one before.
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

/** The failure `type` of a sealed message sent no later than one its workflow already took from the same sender. */
export const MESSAGE_REPLAYED = 'MESSAGE_REPLAYED';

/** When a sealed message was sent, or undefined for one without a seal (or whose seal has no time). @unit milliseconds since the epoch */
export function sealTimeOf(value: unknown): number | undefined {
  if (value === null || typeof value !== 'object' || !(SEAL_FIELD in value)) return undefined;
  const seal = (value as Record<string, unknown>)[SEAL_FIELD] as Partial<MessageSeal> | null;
  return seal !== null && typeof seal === 'object' && typeof seal.sentAt === 'number' && Number.isFinite(seal.sentAt) ? seal.sentAt : undefined;
}

/**
 * Why a message sealed at `sentAt` is a copy of one already taken, when the newest message taken from its sender was
 * sealed at `newest`; undefined when it is newer (or either time is unknown: a message of a worker of an earlier release).
 */
export function findReplayProblem(sentAt: number | undefined, newest: number | undefined): string | undefined {
  if (sentAt === undefined || newest === undefined || sentAt > newest) return undefined;
  return 'it is a copy of a message already taken (it was sent no later than the newest message taken from its sender)';
}

/**
 * A clock for one process's seals: the time now, but never the same time twice nor earlier than the time before (a
 * host's clock stepped back), so every message a process seals is newer than the one it sealed before.
 */
export function sealClock(now: () => number = Date.now): () => number {
  let last = 0;
  return () => (last = Math.max(now(), last + 1));
}
