import type { Client } from '@temporalio/client';
import { createHmac } from 'node:crypto';
import { encryptionCodecOf } from '../../codec/data-converter.js';
import { leaseWorkflowId } from '../../contracts/lease-messages.js';

/*
 * The workflow ids of a key's book. A key is a pipeline's `limits` key with its inputs filled in (`repo:acme/web`) or
 * a lent folder's real path, so a plain id shows input values and folder paths to every reader of the namespace. With
 * encryption on, the id is an HMAC of the key under a key derived from the encryption key instead: it names nothing
 * and cannot be confirmed by guessing. The key's text travels in the workflow's (encrypted) input and answers, so
 * `limits` still shows it to whoever holds the key.
 *
 * Workers of an earlier release named the key plainly, and workers still on an earlier encryption key hash it under
 * that key. While a workflow under such an earlier id is open, a worker takes the key there too, after its own id, so
 * one key is never guarded by two books during a rolling deploy or a key rotation (see docs/limits.md).
 */

/** Where a key's book lives: the id this client's requests start, and the ids earlier workers may still hold it under. */
export interface LeaseIds {
  current(key: string): string;
  /** Ids of the same key under earlier names (the plain key, a hash under an earlier encryption key), oldest last. */
  earlier(key: string): string[];
}

/** What ids look like without encryption: the key itself (nothing to hide it with). */
export const PLAIN_LEASE_IDS: LeaseIds = { current: leaseWorkflowId, earlier: () => [] };

/** Hashed ids start so: apart from every plain id (`agent-pipeline-lease:<key>`), whatever the key. */
export const HASHED_LEASE_ID_PREFIX = 'agent-pipeline-lease-hmac:';

/** The id of `key` under one derived key: 160 bits of its HMAC, in hex. */
function hashedId(secret: Buffer, key: string): string {
  return `${HASHED_LEASE_ID_PREFIX}${createHmac('sha256', secret).update(key, 'utf8').digest('hex').slice(0, 40)}`;
}

/** Ids hashed under the derived keys, the first (the current encryption key's) for new books. */
export function hashedLeaseIds(secrets: readonly Buffer[]): LeaseIds {
  const [current, ...older] = secrets;
  return {
    current: (key) => hashedId(current!, key),
    earlier: (key) => [...older.map((secret) => hashedId(secret, key)), leaseWorkflowId(key)],
  };
}

/** The ids a client uses: hashed when its data converter encrypts (it holds the deployment's key), plain otherwise. */
export function leaseIdsFor(client: Client): LeaseIds {
  const codec = encryptionCodecOf(client.options.loadedDataConverter.payloadCodecs);
  return codec ? hashedLeaseIds(codec.derivedKeys('lease-ids/v1')) : PLAIN_LEASE_IDS;
}

/** Whether `workflowId` is one of the ids of `key`: a book whose key text does not hash to its id is not that key's. */
export function isIdOf(ids: LeaseIds, key: string, workflowId: string): boolean {
  return ids.current(key) === workflowId || ids.earlier(key).includes(workflowId);
}
