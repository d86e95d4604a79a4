import type { S3Client } from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkStoreKey, StoreObjectTooLargeError, StoreUnavailableError, type DeletePrefixOptions, type ObjectStore, type StoredObject } from './object-store.js';
import { STORE_ACCESS_KEY_VARIABLE, STORE_ENDPOINT_VARIABLE, STORE_SECRET_KEY_VARIABLE, STORE_VARIABLE, type StoreSettings } from './store-settings.js';

/*
 * A store in any S3-compatible service (AWS S3, GCS interoperability, R2, MinIO, Ceph, versitygw) through
 * `@aws-sdk/client-s3`, imported the first time the store is used: a worker on the default folder store never loads it.
 * Checksums are computed and checked only where S3 requires them: the SDK's newer default (CRC32 on every request)
 * is refused by several S3-compatible services.
 */

type S3Settings = Extract<StoreSettings, { kind: 's3' }>;
type S3Module = typeof import('@aws-sdk/client-s3');

/** How long to wait for a connection, and for a request's answer to start. @unit milliseconds */
const CONNECT_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 120_000;
/** DeleteObjects takes at most this many keys. */
const DELETE_BATCH = 1_000;

export class S3Store implements ObjectStore {
  readonly description: string;
  private client?: Promise<{ s3: S3Module; client: S3Client }>;

  constructor(private readonly settings: S3Settings) {
    this.description = `s3://${settings.bucket}${settings.prefix ? `/${settings.prefix}` : ''}${settings.endpoint ? ` at ${settings.endpoint}` : ''}`;
  }

  async put(key: string, body: Uint8Array): Promise<void> {
    const { s3, client } = await this.connect();
    await this.call('write', key, () => client.send(new s3.PutObjectCommand({ Bucket: this.settings.bucket, Key: this.keyOf(key), Body: body, ContentLength: body.byteLength })));
  }

  async putFile(key: string, file: string): Promise<void> {
    const { s3, client } = await this.connect();
    const { size } = await stat(file);
    await this.call('write', key, () =>
      client.send(new s3.PutObjectCommand({ Bucket: this.settings.bucket, Key: this.keyOf(key), Body: createReadStream(file), ContentLength: size })),
    );
  }

  async get(key: string, maxBytes: number): Promise<Uint8Array | undefined> {
    const body = await this.open(key, maxBytes);
    if (!body) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of capped(body, key, maxBytes)) chunks.push(chunk);
    return Buffer.concat(chunks);
  }

  async getFile(key: string, target: string, maxBytes: number): Promise<boolean> {
    const body = await this.open(key, maxBytes);
    if (!body) return false;
    const temp = `${target}.${randomUUID()}.tmp`;
    try {
      await pipeline(capped(body, key, maxBytes), createWriteStream(temp, { flags: 'wx' }));
      await rename(temp, target);
    } finally {
      await rm(temp, { force: true });
    }
    return true;
  }

  async *list(prefix: string): AsyncIterable<string> {
    for await (const object of this.listModified(prefix)) yield object.key;
  }

  /** By the service's LastModified: its own clock. */
  async *listModified(prefix: string): AsyncIterable<StoredObject> {
    const { s3, client } = await this.connect();
    const base = this.settings.prefix ? `${this.settings.prefix}/` : '';
    let token: string | undefined;
    do {
      const page = await this.call('list', prefix, () =>
        client.send(new s3.ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: base + prefix, ContinuationToken: token })),
      );
      for (const object of page.Contents ?? []) {
        // A service that names no time: as if written now, so that no age-based delete takes it.
        if (object.Key?.startsWith(base)) yield { key: object.Key.slice(base.length), modifiedMs: object.LastModified?.getTime() ?? Date.now() };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async deletePrefix(prefix: string, options: DeletePrefixOptions = {}): Promise<number> {
    const { s3, client } = await this.connect();
    const before = options.modifiedBeforeMs ?? Number.POSITIVE_INFINITY;
    let batch: string[] = [];
    let deleted = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const objects = batch.map((key) => ({ Key: this.keyOf(key) }));
      await this.call('delete', prefix, () => client.send(new s3.DeleteObjectsCommand({ Bucket: this.settings.bucket, Delete: { Objects: objects, Quiet: true } })));
      deleted += batch.length;
      batch = [];
    };
    for await (const { key, modifiedMs } of this.listModified(prefix)) {
      if (modifiedMs >= before) continue;
      batch.push(key);
      if (batch.length >= DELETE_BATCH) await flush();
    }
    await flush();
    return deleted;
  }

  /** The object's body after checking its announced size, or undefined when there is none. */
  private async open(key: string, maxBytes: number): Promise<Readable | undefined> {
    const { s3, client } = await this.connect();
    const answer = await this.call('read', key, () => client.send(new s3.GetObjectCommand({ Bucket: this.settings.bucket, Key: this.keyOf(key) })), true);
    if (!answer) return undefined;
    const body = answer.Body as Readable;
    if ((answer.ContentLength ?? 0) > maxBytes) {
      body.destroy();
      throw new StoreObjectTooLargeError(`${key} is ${answer.ContentLength} bytes, over the ${maxBytes} allowed`);
    }
    return body;
  }

  private keyOf(key: string): string {
    checkStoreKey(key);
    return this.settings.prefix ? `${this.settings.prefix}/${key}` : key;
  }

  private connect(): Promise<{ s3: S3Module; client: S3Client }> {
    this.client ??= import('@aws-sdk/client-s3').then((s3) => ({ s3, client: new s3.S3Client(this.clientConfig()) }));
    return this.client;
  }

  private clientConfig(): import('@aws-sdk/client-s3').S3ClientConfig {
    const { endpoint, region, pathStyle, credentials } = this.settings;
    return {
      region,
      ...(endpoint ? { endpoint } : {}),
      forcePathStyle: pathStyle,
      // Only the explicit settings, or the SDK's default chain when none is set (docs/configuration.md#object-store).
      ...(credentials ? { credentials } : {}),
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
    };
  }

  /** Runs one request; any failure but a missing object (undefined when `missingOk`) becomes a StoreUnavailableError. */
  private async call<T>(what: string, key: string, request: () => Promise<T>, missingOk = false): Promise<T> {
    try {
      return await request();
    } catch (err) {
      if (missingOk && isMissing(err)) return undefined as T;
      throw new StoreUnavailableError(`the object store ${this.description} failed to ${what} ${key}: ${describeS3Error(err)}; ${fixFor(err)}`, { cause: err, passing: isPassing(err) });
    }
  }
}

/** `body`, failing once more than `maxBytes` came (a store that announced a smaller size, or none). */
async function* capped(body: AsyncIterable<Buffer>, key: string, maxBytes: number): AsyncIterable<Buffer> {
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) throw new StoreObjectTooLargeError(`${key} is over the ${maxBytes} bytes allowed`);
    yield chunk;
  }
}

interface S3ErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

function isMissing(err: unknown): boolean {
  const e = err as S3ErrorShape;
  return e?.name === 'NoSuchKey' || (e?.name === 'NotFound' && e.$metadata?.httpStatusCode === 404);
}

/** No answer at all, a timeout, the service's own failure or throttling: what an outage or a restart looks like. */
function isPassing(err: unknown): boolean {
  const e = err as S3ErrorShape;
  const status = e?.$metadata?.httpStatusCode;
  if (status === undefined) return !isRefusedCredentials(e);
  return status >= 500 || status === 408 || status === 429 || ['SlowDown', 'RequestTimeout', 'ServiceUnavailable', 'InternalError'].includes(e?.name ?? '');
}

/** Credentials the service (or the SDK's default chain) refused or could not find. */
function isRefusedCredentials(e: S3ErrorShape): boolean {
  return ['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'AccessDenied', 'CredentialsProviderError', 'InvalidClientTokenId'].includes(e?.name ?? '');
}

function describeS3Error(err: unknown): string {
  const e = err as S3ErrorShape;
  const status = e?.$metadata?.httpStatusCode;
  return `${e?.code ?? e?.name ?? 'Error'}${status ? ` (HTTP ${status})` : ''}: ${e?.message ?? String(err)}`;
}

/** Which setting to check for a failure, by the service's error code or the connection's. */
function fixFor(err: unknown): string {
  const e = err as S3ErrorShape;
  const status = e?.$metadata?.httpStatusCode;
  if (isRefusedCredentials(e) || status === 401 || status === 403) {
    return `check ${STORE_ACCESS_KEY_VARIABLE} and ${STORE_SECRET_KEY_VARIABLE} (or the AWS default credentials when they are unset)`;
  }
  if (e?.name === 'NoSuchBucket') return `check the bucket in ${STORE_VARIABLE}; create it first`;
  if (status === undefined) return `check ${STORE_ENDPOINT_VARIABLE} and that the store is reachable from here`;
  return `check ${STORE_VARIABLE} and ${STORE_ENDPOINT_VARIABLE}`;
}
