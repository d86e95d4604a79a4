import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import { createHash } from 'node:crypto';
import type { ObjectStore } from '../store/object-store.js';
import { recordRun } from '../store/run-records.js';
import { runKeyPrefix } from '../store/run-keys.js';
import { STORE_VARIABLE } from '../store/store-settings.js';
import { payloadFromBytes, payloadToBytes } from './payload-bytes.js';

/*
 * The claim check (Temporal's pattern for large payloads): a payload over the threshold is written to the object
 * store whole (its protobuf bytes, so its metadata comes back too) under its run's keys,
 * `runs/<sha256 of the run id>/claims/<sha256 of those bytes>`, and history holds a small reference payload instead.
 * Under the run's keys, a claim lives and goes with its run (the store's sweep, store/run-records.ts); a payload whose
 * run is not known (no serialization context) goes to the shared `claims/<sha256>`, and stays. The codec comes after
 * the encryption codec (`[encryption, claimCheck]`): encoding runs in order, so what the store holds is already
 * ciphertext; decoding runs in reverse, so the reference is resolved before decryption. Keys are content hashes and
 * hashed run ids, never a value a run brings; a reference names only such a key, under the run it is read for (or the
 * shared `claims/`), and what is read back must hash to it.
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

/** A claim's key: under its run's keys, or shared (no run known). */
const CLAIM_KEY = /^(?:runs\/[0-9a-f]{64}\/)?claims\/([0-9a-f]{64})$/;
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

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
  /**
   * Record the run (store/run-records.ts) of every claim this codec writes or reads under a run's keys, so that the
   * store's sweep deletes the claims once Temporal no longer keeps the run. A worker's codec does: it only ever works
   * on runs that exist. A client's does not: it may claim a run's input before the run exists.
   */
  recordRuns?: boolean;
  /**
   * Claim into the shared `claims/`, whatever run the SDK names: a schedule's action, which the SDK names by the
   * schedule's id while its runs get ids of their own (`<schedule>-<time>`), each of which reads only its own claims.
   */
  claimShared?: boolean;
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

  /** What it was made with. */
  get settings(): ClaimCheckCodecOptions {
    return { ...this.options };
  }

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.claim(payload, context)));
  }

  async decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.resolve(payload, context)));
  }

  private async claim(payload: Payload, context: SerializationContext | undefined): Promise<Payload> {
    const limit = this.options.thresholdBytes;
    if (limit === undefined || text(payload.metadata?.encoding) === CLAIM_CHECK_ENCODING) return payload;
    const size = (payload.data?.byteLength ?? 0) + Object.values(payload.metadata ?? {}).reduce((sum, v) => sum + v.byteLength, 0);
    if (size <= limit) return payload;
    const bytes = payloadToBytes(payload);
    const run = this.options.claimShared ? undefined : runOf(context);
    const key = `${run ? runKeyPrefix(run.runId) : ''}claims/${sha256(bytes)}`;
    // The record first: a claim under a run's keys is never left without the record its sweep goes by.
    if (run) await this.recordRun(run);
    await this.options.store.put(key, bytes);
    return {
      metadata: { encoding: Buffer.from(CLAIM_CHECK_ENCODING), [CLAIM_KEY_METADATA]: Buffer.from(key), [CLAIM_SIZE_METADATA]: Buffer.from(String(bytes.byteLength)) },
      data: new Uint8Array(0),
    };
  }

  private async resolve(payload: Payload, context: SerializationContext | undefined): Promise<Payload> {
    if (text(payload.metadata?.encoding) !== CLAIM_CHECK_ENCODING) return payload;
    const key = text(payload.metadata?.[CLAIM_KEY_METADATA]);
    // History is not trusted to name any key: only a claim's.
    const hash = CLAIM_KEY.exec(key)?.[1];
    if (hash === undefined) throw new ClaimCheckError(`a claim-check payload names "${key.slice(0, 100)}", which is not a claim's key (runs/<sha256>/claims/<sha256> or claims/<sha256>)`);
    const run = runOf(context);
    // Nor another run's claim: read in this run's context (a start input, an update naming it), it handed this run
    // another run's payload (its input, a stage's result), which its starter could not read without the store.
    const owner = /^runs\/[0-9a-f]{64}\//.exec(key)?.[0];
    if (run && owner !== undefined && owner !== runKeyPrefix(run.runId)) {
      throw new ClaimCheckError(
        `a payload of run ${run.runId} names ${key}, a payload another run keeps in the object store; a run reads only its own (a schedule's runs read the shared claims/ that \`schedule create\` and \`schedule update\` write: update a schedule created before, once)`,
      );
    }
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
    if (sha256(bytes) !== hash) {
      throw new ClaimCheckError(`${key} in ${store.description} does not match its hash: the object was altered; the run cannot read that payload`);
    }
    // A client's claim of a run's input is recorded by the first worker that reads it: the run exists by then.
    // Best effort: reading the payload does not depend on it, and the next read or claim records the run again.
    if (run && key.startsWith(runKeyPrefix(run.runId))) await this.recordRun(run).catch(() => undefined);
    return payloadFromBytes(Buffer.from(bytes));
  }

  private async recordRun(run: { runId: string; namespace: string }): Promise<void> {
    if (this.options.recordRuns) await recordRun(this.options.store, run);
  }
}

/** The run a payload belongs to, when the SDK says (its serialization context; the run id is the workflow id). */
function runOf(context: SerializationContext | undefined): { runId: string; namespace: string } | undefined {
  return context?.workflowId && context.namespace ? { runId: context.workflowId, namespace: context.namespace } : undefined;
}

/** The claim-check codec among `codecs`, found by its shape. */
export function claimCheckCodecOf(codecs: readonly PayloadCodec[]): ClaimCheckCodec | undefined {
  return codecs.find((codec): codec is ClaimCheckCodec => typeof (codec as Partial<ClaimCheckCodec>).claimsToStore === 'boolean');
}

/** `codecs` with the claim check claiming into the shared `claims/` (`claimShared`): a schedule client's. */
export function withSharedClaims(codecs: readonly PayloadCodec[]): PayloadCodec[] {
  return codecs.map((codec) => {
    const claims = claimCheckCodecOf([codec]);
    return claims ? new ClaimCheckCodec({ ...claims.settings, claimShared: true }) : codec;
  });
}

/** `codecs` without the claim-check codec: for measuring what a payload would be without writing anything. */
export function withoutClaimCheck(codecs: readonly PayloadCodec[]): PayloadCodec[] {
  return codecs.filter((codec) => typeof (codec as Partial<ClaimCheckCodec>).claimsToStore !== 'boolean');
}
