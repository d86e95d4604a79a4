import type { DataConverter, LoadedDataConverter, Payload, PayloadCodec } from '@temporalio/common';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.js';
import type { ObjectStore } from '../store/object-store.js';
import { openStore } from '../store/open-store.js';
import { DEFAULT_WORKER_STORE_WAIT, STORE_VARIABLE } from '../store/store-settings.js';
import { CLAIM_CHECK_BYTES_VARIABLE, ClaimCheckCodec, DEFAULT_CLAIM_CHECK_BYTES, ClaimCheckError } from './claim-check-codec.js';
import { EncryptionCodec, PayloadDecryptionError } from './encryption-codec.js';
import { ENCRYPTION_KEY_VARIABLE, parseEncryptionKeys } from './encryption-key.js';

/*
 * Where the codecs are wired in: the data converter of clients and workers, and the decoding of payloads that this
 * project reads from history or descriptions itself (outside the SDK's own decoding). The codecs are the encryption
 * codec (when a key is set) and then the claim check (codec/claim-check-codec.ts), in that order.
 */

/**
 * The compiled failure converter that encodes common attributes. Running from source (tests), the compiled copy in
 * dist/ is used: the SDK loads it with `require`, which cannot load TypeScript.
 */
export const ENCODED_FAILURE_CONVERTER_PATH = [
  new URL('./encoded-failure-converter.js', import.meta.url),
  new URL('../../dist/codec/encoded-failure-converter.js', import.meta.url),
]
  .map((url) => fileURLToPath(url))
  .find((file) => existsSync(file));

/**
 * The compiled payload converter that marks payloads which arrived unencrypted (codec/marking-payload-converter.ts),
 * found like the failure converter.
 */
export const MARKING_PAYLOAD_CONVERTER_PATH = [
  new URL('./marking-payload-converter.js', import.meta.url),
  new URL('../../dist/codec/marking-payload-converter.js', import.meta.url),
]
  .map((url) => fileURLToPath(url))
  .find((file) => existsSync(file));

/**
 * The payload codecs for `encryptionKey` (the `AGENT_PIPELINE_ENCRYPTION_KEY` format), none when it is empty.
 * @param source what errors name as the key's origin
 * @throws ConfigError `CONFIG_INVALID` naming `source`
 */
export function payloadCodecsFor(encryptionKey: string | undefined, source = ENCRYPTION_KEY_VARIABLE): PayloadCodec[] {
  const value = encryptionKey?.trim();
  return value ? [new EncryptionCodec(parseEncryptionKeys(value, source))] : [];
}

/** The payload codecs of the environment's `AGENT_PIPELINE_ENCRYPTION_KEY`, none when it is unset. */
export function payloadCodecsFromEnv(env: NodeJS.ProcessEnv = process.env): PayloadCodec[] {
  return payloadCodecsFor(env[ENCRYPTION_KEY_VARIABLE]);
}

/**
 * The threshold of `AGENT_PIPELINE_CLAIM_CHECK_BYTES`: payloads over it go to the store; `0` claims none.
 * @throws ConfigError `CONFIG_INVALID` naming the variable
 */
export function claimCheckBytesFromEnv(env: NodeJS.ProcessEnv): number {
  const value = env[CLAIM_CHECK_BYTES_VARIABLE]?.trim();
  if (!value) return DEFAULT_CLAIM_CHECK_BYTES;
  if (!/^\d{1,10}$/.test(value)) {
    throw new ConfigError(`[CONFIG_INVALID] ${CLAIM_CHECK_BYTES_VARIABLE}: "${value.slice(0, 40)}" is not a number of bytes; set it to a whole number such as 262144, or 0 to keep every payload in history`);
  }
  return Number(value);
}

/** Where the store is for the codecs, and whether this process may claim payloads into it. */
export interface StoreCodecOptions {
  /** The default store's folder (`<workspaces root>/.agent-pipeline/store`). */
  defaultStoreDir: string;
  /**
   * A worker claims large payloads into its store whatever the setting; a client only when `AGENT_PIPELINE_STORE` is
   * set: on a machine of its own, the default folder is not one the workers read. Both resolve references.
   */
  role: 'worker' | 'client';
  /** The encryption key setting (the keys encrypt the store's objects too). */
  encryptionKey?: string;
  /** What errors name as the key's origin. */
  keySource?: string;
  /** A worker's store waits out outages (store/waiting-store.ts); this is where it says so. */
  reportStoreWait?: (message: string) => void;
}

/**
 * The codecs of a worker or client: the encryption codec when a key is set, then the claim check on the store of
 * `AGENT_PIPELINE_STORE`. Nothing is contacted yet.
 * @throws ConfigError `CONFIG_INVALID` naming the variable that is wrong
 */
export function storePayloadCodecs(env: NodeJS.ProcessEnv, options: StoreCodecOptions): PayloadCodec[] {
  const key = options.encryptionKey?.trim();
  const source = options.keySource ?? ENCRYPTION_KEY_VARIABLE;
  const codecs = payloadCodecsFor(key, source);
  const wait = options.role === 'worker' ? { wait: { fallback: DEFAULT_WORKER_STORE_WAIT, report: options.reportStoreWait } } : {};
  const store = openStore(env, { defaultDir: options.defaultStoreDir, encryptionKeys: key ? parseEncryptionKeys(key, source) : undefined, ...wait });
  const threshold = claimCheckBytesFromEnv(env);
  const claims = threshold > 0 && (options.role === 'worker' || Boolean(env[STORE_VARIABLE]?.trim()));
  return [...codecs, new ClaimCheckCodec({ store, thresholdBytes: claims ? threshold : undefined, recordRuns: options.role === 'worker' })];
}

/** The store the codecs' claim check uses, if any. */
export function storeOfCodecs(codecs: readonly PayloadCodec[]): ObjectStore | undefined {
  return codecs.find((codec): codec is ClaimCheckCodec => typeof (codec as Partial<ClaimCheckCodec>).claimsToStore === 'boolean')?.store;
}

/** A client's data converter: the codecs only (decoding an encoded failure needs no option). */
export function clientDataConverter(codecs: PayloadCodec[]): DataConverter | undefined {
  return codecs.length > 0 ? { payloadCodecs: codecs } : undefined;
}

/**
 * A worker's data converter: the codecs, failures whose message and stack trace are payloads the codecs encrypt, and
 * the payload converter that marks what arrived unencrypted (so validators can refuse what no key holder wrote). The
 * workflow code must be bundled with the same converters (see `dev/bundle-workflows.ts`).
 */
export function workerDataConverter(codecs: PayloadCodec[]): DataConverter | undefined {
  if (codecs.length === 0) return undefined;
  // Without encryption the converters stay the SDK's: the prebuilt plain bundle has its failure converter.
  if (!encryptionCodecOf(codecs)) return { payloadCodecs: codecs };
  if (!ENCODED_FAILURE_CONVERTER_PATH) throw new Error('dist/codec/encoded-failure-converter.js is missing: run `npm run build`');
  if (!MARKING_PAYLOAD_CONVERTER_PATH) throw new Error('dist/codec/marking-payload-converter.js is missing: run `npm run build`');
  return { payloadCodecs: codecs, failureConverterPath: ENCODED_FAILURE_CONVERTER_PATH, payloadConverterPath: MARKING_PAYLOAD_CONVERTER_PATH };
}

/**
 * The encryption codec among `codecs`, if any: what the key holders of the deployment share. Found by its shape, not
 * `instanceof`, so that a copy of this module loaded twice (source and dist) still finds it.
 */
export function encryptionCodecOf(codecs: readonly PayloadCodec[]): Pick<EncryptionCodec, 'derivedKeys' | 'keyId'> | undefined {
  return codecs.find((codec): codec is EncryptionCodec => typeof (codec as Partial<EncryptionCodec>).derivedKeys === 'function');
}

/** Runs payloads through the codecs' decoders, last codec first (the SDK's order). */
export async function decodePayloads(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  let decoded = payloads;
  for (const codec of [...codecs].reverse()) decoded = await codec.decode(decoded);
  return decoded;
}

/** Runs payloads through the codecs' encoders, first codec first. */
export async function encodePayloads(codecs: readonly PayloadCodec[], payloads: Payload[]): Promise<Payload[]> {
  let encoded = payloads;
  for (const codec of codecs) encoded = await codec.encode(encoded);
  return encoded;
}

/** A payload list with its payloads decoded, in a copy; the same object when there is nothing to decode. */
export async function decodePayloadList<T extends { payloads?: Payload[] | null } | null | undefined>(codecs: readonly PayloadCodec[], list: T): Promise<T> {
  if (codecs.length === 0 || !list?.payloads?.length) return list;
  return { ...list, payloads: await decodePayloads(codecs, list.payloads) };
}

/** The first payload of a list, decoded by the codecs and the converter; undefined when there is none or it cannot be read. */
export async function decodeFirstPayload<T>(converter: LoadedDataConverter, list: { payloads?: Payload[] | null } | null | undefined): Promise<T | undefined> {
  const first = list?.payloads?.[0];
  if (!first) return undefined;
  const [decoded] = await decodePayloads(converter.payloadCodecs, [first]);
  return converter.payloadConverter.fromPayload<T>(decoded!);
}

/**
 * What a person must change when `err` (or its cause) is a payload this client could not decrypt: a missing
 * `AGENT_PIPELINE_ENCRYPTION_KEY`, or one without the key a payload names. Undefined for any other error.
 */
export function decryptionProblem(err: unknown): string | undefined {
  for (let current = err; current instanceof Error; current = current.cause) {
    if (current instanceof PayloadDecryptionError || current instanceof ClaimCheckError) return current.message;
    if (/Unknown encoding: binary\/encrypted/.test(current.message)) {
      return `the run's payloads are encrypted and ${ENCRYPTION_KEY_VARIABLE} is not set here; set it to the keys its workers use`;
    }
  }
  return undefined;
}
