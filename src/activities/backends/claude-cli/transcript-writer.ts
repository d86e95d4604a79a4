import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { REDACTED } from '../../secrets.js';

/*
 * The per-attempt transcript: the CLI's stream as it arrives, with secrets replaced. Agents can print
 * the API key (a Bash tool running `env` sees it), so every byte passes a streaming redactor that holds
 * back just enough bytes to catch a secret split across two writes. Writes wait for the disk
 * (backpressure), so a fast agent on a slow disk does not pile up memory.
 */

/** Shorter values are not treated as secrets, as in `secrets.ts`. */
const MIN_SECRET_BYTES = 8;
const REDACTED_BYTES = Buffer.from(REDACTED);

export class TranscriptWriter {
  private readonly secrets: Buffer[];
  private readonly holdBack: number;
  private carry = Buffer.alloc(0);
  private failure: Error | undefined;

  private constructor(
    private readonly stream: WriteStream,
    secrets: readonly (string | undefined)[],
  ) {
    this.secrets = secrets.filter((s): s is string => !!s && s.length >= MIN_SECRET_BYTES).map((s) => Buffer.from(s));
    this.holdBack = Math.max(0, ...this.secrets.map((s) => s.length - 1));
    stream.on('error', (err) => {
      this.failure = err;
    });
  }

  /** Opens `file` for appending (a retried attempt never overwrites an earlier transcript). */
  static async open(file: string, secrets: readonly (string | undefined)[]): Promise<TranscriptWriter> {
    await mkdir(path.dirname(file), { recursive: true });
    const stream = createWriteStream(file, { flags: 'a' });
    await once(stream, 'open');
    return new TranscriptWriter(stream, secrets);
  }

  /**
   * Appends `bytes`, redacted; resolves once the stream can take more. The input is written as views,
   * not copied: only the few bytes held back at the end are.
   */
  async write(bytes: Buffer): Promise<void> {
    if (this.failure) throw this.failure;
    const out: Buffer[] = [];
    let rest = bytes;
    if (this.carry.length > 0 && bytes.length < this.holdBack) {
      rest = Buffer.concat([this.carry, bytes]);
    } else if (this.carry.length > 0) {
      // A secret that starts in the held-back bytes ends within the next `holdBack` bytes, all here.
      const head = Buffer.concat([this.carry, bytes.subarray(0, this.holdBack)]);
      const end = this.redactInto(out, head, this.carry.length);
      if (end < this.carry.length) out.push(head.subarray(end, this.carry.length));
      rest = bytes.subarray(Math.max(0, end - this.carry.length));
    }
    const end = this.redactInto(out, rest, rest.length);
    const keepFrom = Math.max(end, rest.length - this.holdBack);
    out.push(rest.subarray(end, keepFrom));
    this.carry = Buffer.from(rest.subarray(keepFrom));
    for (const piece of out) {
      if (piece.length > 0 && !this.stream.write(piece)) await once(this.stream, 'drain');
    }
  }

  /** Writes what was held back and closes the file. */
  async close(): Promise<void> {
    if (this.carry.length > 0 && !this.failure) this.stream.write(this.carry);
    this.carry = Buffer.alloc(0);
    if (this.stream.closed) return;
    await new Promise<void>((resolve) => this.stream.end(resolve));
  }

  /**
   * Pushes `data` up to the end of the last secret that starts before `startLimit`, each secret
   * replaced; returns where that is (0 when there is none).
   */
  private redactInto(out: Buffer[], data: Buffer, startLimit: number): number {
    let done = 0;
    for (;;) {
      let at = -1;
      let length = 0;
      for (const secret of this.secrets) {
        const found = data.indexOf(secret, done);
        if (found !== -1 && found < startLimit && (at === -1 || found < at)) {
          at = found;
          length = secret.length;
        }
      }
      if (at === -1) return done;
      out.push(data.subarray(done, at), REDACTED_BYTES);
      done = at + length;
    }
  }
}
