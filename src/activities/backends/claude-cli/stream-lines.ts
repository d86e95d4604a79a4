import { JsonSkeleton } from './bounded-json.js';

/*
 * Splits the CLI's stdout into JSON lines with bounded memory. A line up to `maxLineBytes` is held
 * and handed over whole. A longer one (an assistant message or result of hundreds of MB) is passed
 * on as raw bytes while it arrives, for the transcript, and ends as a bounded skeleton to parse.
 */

const NEWLINE = 0x0a;

/** Caps of a {@link StdoutLineSplitter}. All @unit bytes. */
export interface LineSplitterOptions {
  /** Lines up to this size are held and handed over whole. @default 1 MiB */
  maxLineBytes?: number;
  /** In a longer line, each string keeps only its last this many bytes. @default 256 KiB */
  maxStringBytes?: number;
}

/** What the splitter hands over, in stream order. */
export type StdoutPiece =
  /** A complete line (without its newline), short enough to have been held. */
  | { kind: 'line'; raw: Buffer }
  /** Raw bytes of a long line as they arrive, its newline included. */
  | { kind: 'long-bytes'; chunk: Buffer }
  /** The end of a long line: its skeleton (long strings cut to their tails; `undefined` if too large). */
  | { kind: 'long-line'; skeleton: string | undefined; bytes: number; truncatedStrings: number };

export class StdoutLineSplitter {
  private readonly maxLineBytes: number;
  private readonly maxStringBytes: number;
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Set while the current line is too long to hold. */
  private long: { skeleton: JsonSkeleton; bytes: number } | undefined;

  constructor(options: LineSplitterOptions = {}) {
    this.maxLineBytes = options.maxLineBytes ?? 1024 * 1024;
    this.maxStringBytes = options.maxStringBytes ?? 256 * 1024;
  }

  push(chunk: Buffer): StdoutPiece[] {
    const pieces: StdoutPiece[] = [];
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const end = newline === -1 ? chunk.length : newline;
      this.add(chunk.subarray(start, end), pieces);
      if (newline === -1) break;
      this.endLine(pieces, chunk.subarray(newline, newline + 1));
      start = newline + 1;
    }
    return pieces;
  }

  /** Hands over a last line that had no newline. */
  end(): StdoutPiece[] {
    const pieces: StdoutPiece[] = [];
    if (this.long || this.heldBytes > 0) this.endLine(pieces, undefined);
    return pieces;
  }

  private add(part: Buffer, pieces: StdoutPiece[]): void {
    if (part.length === 0) return;
    // Views, not copies: the stream never reuses a chunk, and copying every byte would double the garbage.
    if (!this.long && this.heldBytes + part.length <= this.maxLineBytes) {
      this.held.push(part);
      this.heldBytes += part.length;
      return;
    }
    if (!this.long) {
      this.long = {
        skeleton: new JsonSkeleton({ maxStringBytes: this.maxStringBytes, maxTotalBytes: 4 * this.maxLineBytes }),
        bytes: 0,
      };
      for (const heldPart of this.held) this.passLong(heldPart, pieces);
      this.held = [];
      this.heldBytes = 0;
    }
    this.passLong(part, pieces);
  }

  private passLong(part: Buffer, pieces: StdoutPiece[]): void {
    if (!this.long) return;
    this.long.skeleton.push(part);
    this.long.bytes += part.length;
    pieces.push({ kind: 'long-bytes', chunk: part });
  }

  private endLine(pieces: StdoutPiece[], newline: Buffer | undefined): void {
    if (this.long) {
      if (newline) pieces.push({ kind: 'long-bytes', chunk: newline });
      const { text, truncatedStrings } = this.long.skeleton.finish();
      pieces.push({ kind: 'long-line', skeleton: text, bytes: this.long.bytes, truncatedStrings });
      this.long = undefined;
      return;
    }
    if (this.heldBytes > 0) pieces.push({ kind: 'line', raw: this.held.length === 1 ? this.held[0] : Buffer.concat(this.held) });
    this.held = [];
    this.heldBytes = 0;
  }
}
