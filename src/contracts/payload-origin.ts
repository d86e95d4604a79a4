/*
 * Which payloads a workflow may take as written by a holder of the deployment's encryption key. With
 * AGENT_PIPELINE_ENCRYPTION_KEY set, workers and the clients of people who hold the key encrypt every payload with
 * AES-256-GCM, which authenticates: a payload that decrypts was written by a key holder. The codec never fails on a
 * payload that is not encrypted (a stranger's plain signal would otherwise fail every workflow task of its run, for
 * ever); it marks it in its metadata instead, and the workers' payload converter hangs the mark on the decoded value,
 * where update validators see it (codec/encryption-codec.ts, codec/marking-payload-converter.ts). Without encryption
 * nothing is marked: any namespace client could have written any payload (docs/security.md says what that allows).
 *
 * Pure and free of imports: bundled into the workflow code and loaded by path with the payload converter.
 */

/** The metadata entry the codec adds to a payload it decoded without decrypting it. */
export const UNENCRYPTED_METADATA = 'agent-pipeline-unencrypted';

/** Not enumerable and not JSON: no sender can set it, and nothing that copies or serialises the value carries it on. */
const UNENCRYPTED = Symbol.for('agent-pipeline/unencrypted');

/** Marks a decoded value as one that arrived unencrypted. Only objects can carry the mark (every message is one). */
export function markUnencrypted<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.defineProperty(value, UNENCRYPTED, { value: true, enumerable: false });
  }
  return value;
}

/**
 * True when a message arrived unencrypted on a worker that encrypts: it was not written by a holder of the key.
 * Always false on workers without encryption, where nothing can be told apart.
 */
export function cameUnencrypted(value: unknown): boolean {
  return value !== null && typeof value === 'object' && (value as Record<symbol, unknown>)[UNENCRYPTED] === true;
}

/** The failure `type` of a message a validator refused because no key holder wrote it. */
export const MESSAGE_NOT_AUTHENTICATED = 'MESSAGE_NOT_AUTHENTICATED';
