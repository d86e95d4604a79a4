import type { Payload, PayloadCodec } from '@temporalio/common';
import { createHash } from 'node:crypto';
import type { ObjectStore } from '../store/object-store.js';
import { STORE_VARIABLE } from '../store/store-settings.js';
import { payloadFromBytes, payloadToBytes } from './payload-bytes.js';

/*
 * The claim check (Temporal's pattern for large payloads): a payload over the threshold is written to the object
 * store whole (its protobuf bytes, so its metadata comes back too) under `claims/<sha256 of those bytes>`, and history
 * holds a small reference payload instead. The codec comes after the encryption codec (`[encryption, claimCheck]`):
 * encoding runs in order, so what the store holds is already ciphertext; decoding runs in reverse, so the reference
 * is resolved before decryption. Keys are content hashes, never a value a run brings; a reference names only such a
 * key, and what is read back must hash to it.
 */

/** `metadata.encoding` of a reference payload. */
export const CLAIM_CHECK_ENCODING = 'binary/claim-check';
/** The reference's metadata: the store key of the claimed payload. */
export const CLAIM_KEY_METADATA = 'claim-check-key';
/** The reference's metadata: the claimed payload's size. @unit bytes */
export const CLAIM_SIZE_METADATA = 'claim-check-bytes';

/** The variable with the threshold. */
export const CLAIM_CHECK_BYTES_VARIABLE = 'AGENT_PIPELINE_CLAIM_CHECK_BYTES';
/** Payloads larger than this go to the store. @unit bytes */
export const DEFAULT_CLAIM_CHECK_BYTES = 256 * 1024;
/** The largest claimed payload read back: what the largest run input (RUN_INPUT_MAX_BYTES_WITH_STORE) encodes to, and more. @unit bytes */
export const MAX_CLAIMED_PAYLOAD_BYTES = 256 * 1024 * 1024;

const CLAIM_KEY = /^claims\/[0-9a-f]{64}$/;

const text = (value: Uint8Array | undefined | null): string => (value ? Buffer.from(value).toString('utf8') : '');

/** Thrown when a reference cannot be resolved: the store is another one than the writer's, unreachable, or altered. */
export class ClaimCheckError extends Error {
  override readonly name = 'ClaimCheckError';
}

export interface ClaimCheckCodecOptions {
  store: ObjectStore;
  /**
   * Payloads over this size are claimed; `undefined` claims none and only resolves references (a client without a
   * store of its own setting: what it would write there, the workers could not read). @unit bytes
   */
  thresholdBytes?: number;
}

export class ClaimCheckCodec implements PayloadCodec {
  /** Marks the codec by shape (`claimCheckCodecOf`): a copy of this module loaded twice (source and dist) is found too. */
  readonly claimsToStore: boolean;

  constructor(private readonly options: ClaimCheckCodecOptions) {
    this.claimsToStore = options.thresholdBytes !== undefined;
  }

  /** The store references point into. */
  get store(): ObjectStore {
    return this.options.store;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.claim(payload)));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.resolve(payload)));
  }

  private async claim(payload: Payload): Promise<Payload> {
    const limit = this.options.thresholdBytes;
    if (limit === undefined || text(payload.metadata?.encoding) === CLAIM_CHECK_ENCODING) return payload;
    const size = (payload.data?.byteLength ?? 0) + Object.values(payload.metadata ?? {}).reduce((sum, v) => sum + v.byteLength, 0);
    if (size <= limit) return payload;
    const bytes = payloadToBytes(payload);
    const key = `claims/${createHash('sha256').update(bytes).digest('hex')}`;
    await this.options.store.put(key, bytes);
    return {
      metadata: { encoding: Buffer.from(CLAIM_CHECK_ENCODING), [CLAIM_KEY_METADATA]: Buffer.from(key), [CLAIM_SIZE_METADATA]: Buffer.from(String(bytes.byteLength)) },
      data: new Uint8Array(0),
    };
  }

  private async resolve(payload: Payload): Promise<Payload> {
    if (text(payload.metadata?.encoding) !== CLAIM_CHECK_ENCODING) return payload;
    const key = text(payload.metadata?.[CLAIM_KEY_METADATA]);
    // History is not trusted to name any key: only a claim's.
    if (!CLAIM_KEY.test(key)) throw new ClaimCheckError(`a claim-check payload names "${key.slice(0, 100)}", which is not a claim's key (claims/<sha256>)`);
    const store = this.options.store;
    const fix = `set ${STORE_VARIABLE} (and its AGENT_PIPELINE_STORE_* settings) to the store the workers use`;
    let bytes: Uint8Array | undefined;
    try {
      bytes = await store.get(key, MAX_CLAIMED_PAYLOAD_BYTES);
    } catch (err) {
      throw new ClaimCheckError(`a payload of this run is kept in the object store as ${key}, and reading it from ${store.description} failed: ${(err as Error).message}; ${fix}`, { cause: err });
    }
    if (bytes === undefined) {
      throw new ClaimCheckError(`a payload of this run is kept in the object store as ${key}, which ${store.description} does not hold (${STORE_VARIABLE} here is not the workers' store, or the run was pruned); ${fix}`);
    }
    if (`claims/${createHash('sha256').update(bytes).digest('hex')}` !== key) {
      throw new ClaimCheckError(`${key} in ${store.description} does not match its hash: the object was altered; the run cannot read that payload`);
    }
    return payloadFromBytes(Buffer.from(bytes));
  }
}

/** The claim-check codec among `codecs`, found by its shape. */
export function claimCheckCodecOf(codecs: readonly PayloadCodec[]): ClaimCheckCodec | undefined {
  return codecs.find((codec): codec is ClaimCheckCodec => typeof (codec as Partial<ClaimCheckCodec>).claimsToStore === 'boolean');
}

/** `codecs` without the claim-check codec: for measuring what a payload would be without writing anything. */
export function withoutClaimCheck(codecs: readonly PayloadCodec[]): PayloadCodec[] {
  return codecs.filter((codec) => typeof (codec as Partial<ClaimCheckCodec>).claimsToStore !== 'boolean');
}
