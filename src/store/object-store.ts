/**
 * Where runs keep what must outlive the machine that ran them: workspace checkpoints, bookkeeping and payloads too
 * large for history (claim checks). One interface, two kinds: a folder (`file://`, the default) and any S3-compatible
 * service (`s3://`). Keys are built by the project from hashes and run ids, never from a value a run brings.
 */
export interface ObjectStore {
  /** The store's URL without credentials, for messages and logs. */
  readonly description: string;
  /** Writes an object whole: a reader sees the old object, the new one, or none, never half of one. */
  put(key: string, body: Uint8Array): Promise<void>;
  /** Writes the contents of a local file (large objects: git bundles, archives). */
  putFile(key: string, file: string): Promise<void>;
  /** The object's bytes, or undefined when there is none; refuses (StoreObjectTooLargeError) an object over maxBytes. */
  get(key: string, maxBytes: number): Promise<Uint8Array | undefined>;
  /** Downloads an object into `file` (temp file, then rename); false when there is none; refuses one over maxBytes. */
  getFile(key: string, file: string, maxBytes: number): Promise<boolean>;
  /** Every key under `prefix`, in no particular order. */
  list(prefix: string): AsyncIterable<string>;
  /** Every object under `prefix` with when it was last written, in no particular order. */
  listModified(prefix: string): AsyncIterable<StoredObject>;
  /** Deletes every object under `prefix` (with `modifiedBeforeMs`, those last written before it); returns how many were deleted. */
  deletePrefix(prefix: string, options?: DeletePrefixOptions): Promise<number>;
}

/** An object's key, and when it was last written by the store's own clock (an S3 service's, a folder's file system's). */
export interface StoredObject {
  key: string;
  /** @unit milliseconds since the epoch */
  modifiedMs: number;
}

export interface DeletePrefixOptions {
  /**
   * Deletes only the objects last written before this time, by the store's clock (StoredObject `modifiedMs`): one
   * written, or written again, at or after it stays. @unit milliseconds since the epoch @default every object
   */
  modifiedBeforeMs?: number;
}

/** The store could not be reached or refused a request: retryable, and names the setting to check. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  /**
   * An outage that may pass (no connection, a timeout, a 5xx or throttling answer), which a worker waits out
   * (waiting-store.ts); false for a refusal that waiting does not change (credentials, a missing bucket).
   */
  readonly passing: boolean;
  constructor(message: string, options?: { cause?: unknown; passing?: boolean }) {
    super(message, options);
    this.passing = options?.passing ?? false;
  }
}

/**
 * Whether `err` is an outage that may pass ({@link StoreUnavailableError} `passing`). By name: the store's errors cross
 * module copies (source and dist).
 */
export function isPassingOutage(err: unknown): boolean {
  return err instanceof Error && err.name === 'StoreUnavailableError' && (err as { passing?: boolean }).passing === true;
}

/** An object is larger than its reader allows. */
export class StoreObjectTooLargeError extends Error {
  override readonly name = 'StoreObjectTooLargeError';
}

/** Keys are paths of safe segments: letters, digits, `._-`, no empty, `.` or `..` segment, no leading `/`. */
export function checkStoreKey(key: string): string {
  const segments = key.split('/');
  const bad = segments.find((s) => !/^[A-Za-z0-9._-]+$/.test(s) || s === '.' || s === '..');
  if (key.length > 512 || bad !== undefined) throw new Error(`not a valid store key: ${JSON.stringify(key)}`);
  return key;
}
