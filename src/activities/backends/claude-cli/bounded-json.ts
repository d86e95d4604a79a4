/*
 * A bounded copy of one JSON text too large to hold: every long string keeps only its tail, so a
 * 200 MB assistant message turns into a few hundred KB that `JSON.parse` reads like any other line.
 * Bytes are scanned with `indexOf` for the only two bytes that matter inside a string (`"` and `\`),
 * never decoded, and a long string's bytes are kept as views of the input chunks that are dropped
 * whole from the front: the cost is one pass, and no input byte is copied except the final tail.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LETTER_U = 0x75;

/** Caps of a {@link JsonSkeleton}. */
export interface JsonSkeletonOptions {
  /** A longer string keeps only its last this many bytes. @unit bytes */
  maxStringBytes: number;
  /** Past this size the skeleton is given up (`text` becomes `undefined`). @unit bytes */
  maxTotalBytes: number;
}

/** What a {@link JsonSkeleton} made of its input. */
export interface SkeletonResult {
  /** The JSON text with long strings cut to their tails; `undefined` when even that was too large. */
  text: string | undefined;
  /** How many strings lost their beginning. */
  truncatedStrings: number;
}

/** Length of the escape token starting at `at` (`\\n` 2, `\\u00e9` 6), which may run past the end of `bytes`. */
function escapeLength(bytes: Buffer, at: number, next: number | undefined): number {
  return (at + 1 < bytes.length ? bytes[at + 1] : next) === LETTER_U ? 6 : 2;
}

/**
 * How many bytes at the start of the view after `view` still belong to an escape token begun in
 * `view`, given that the first `skip` bytes of `view` belong to one begun earlier.
 */
function escapeOverhang(view: Buffer, skip: number, nextByte: number | undefined): number {
  let at = view.indexOf(BACKSLASH, skip);
  let end = skip;
  while (at !== -1) {
    end = at + escapeLength(view, at, nextByte);
    if (end >= view.length) break;
    at = view.indexOf(BACKSLASH, end);
  }
  return Math.max(0, end - view.length);
}

/** Builds the bounded copy of one JSON text fed in chunks of any size (see the module comment). */
export class JsonSkeleton {
  private readonly parts: Buffer[] = [];
  private size = 0;
  private overflow = false;
  private inString = false;
  /** The previous byte inside the string was a backslash that escapes the next one. */
  private escaped = false;
  /** The current string's kept bytes, as views of the input. */
  private views: Buffer[] = [];
  private viewBytes = 0;
  /** Bytes at the start of `views[0]` that belong to an escape token whose beginning was dropped. */
  private skip = 0;
  private currentTruncated = false;
  private truncatedStrings = 0;

  constructor(private readonly options: JsonSkeletonOptions) {}

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) i = this.inString ? this.scanString(chunk, i) : this.scanStructure(chunk, i);
  }

  finish(): SkeletonResult {
    if (this.inString) this.closeString();
    const text = this.overflow ? undefined : Buffer.concat(this.parts).toString('utf8');
    return { text, truncatedStrings: this.truncatedStrings };
  }

  /** Outside strings: copies bytes up to and including the next opening quote. */
  private scanStructure(chunk: Buffer, from: number): number {
    const quote = chunk.indexOf(QUOTE, from);
    const end = quote === -1 ? chunk.length : quote + 1;
    // A copy: a view would keep the whole chunk alive as long as the skeleton.
    this.emit(Buffer.from(chunk.subarray(from, end)));
    if (quote !== -1) {
      this.inString = true;
      this.escaped = false;
      this.views = [];
      this.viewBytes = 0;
      this.skip = 0;
      this.currentTruncated = false;
    }
    return end;
  }

  /** Inside a string: keeps its bytes up to the closing quote, which is any quote not escaped. */
  private scanString(chunk: Buffer, from: number): number {
    let i = from;
    let nextQuote = -2;
    let nextBackslash = -2;
    while (i < chunk.length) {
      if (this.escaped) {
        this.escaped = false;
        i += 1;
        continue;
      }
      if (nextQuote !== -1 && nextQuote < i) nextQuote = chunk.indexOf(QUOTE, i);
      if (nextBackslash !== -1 && nextBackslash < i) nextBackslash = chunk.indexOf(BACKSLASH, i);
      if (nextBackslash !== -1 && (nextQuote === -1 || nextBackslash < nextQuote)) {
        this.escaped = true;
        i = nextBackslash + 1;
        continue;
      }
      if (nextQuote === -1) break;
      this.keep(chunk.subarray(from, nextQuote));
      this.closeString();
      return nextQuote + 1;
    }
    this.keep(chunk.subarray(from, chunk.length));
    return chunk.length;
  }

  /** Keeps a view of the string's bytes, dropping whole views from the front once enough remain. */
  private keep(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.views.push(bytes);
    this.viewBytes += bytes.length;
    while (this.views.length > 1 && this.viewBytes - this.views[0].length >= this.options.maxStringBytes) {
      const dropped = this.views.shift() as Buffer;
      this.viewBytes -= dropped.length;
      this.skip = escapeOverhang(dropped, this.skip, this.views[0][0]);
      this.currentTruncated = true;
    }
  }

  private closeString(): void {
    let tail = Buffer.concat(this.views);
    let start = Math.min(this.skip, tail.length);
    if (tail.length - start > this.options.maxStringBytes) {
      start = this.safeCut(tail, start, tail.length - this.options.maxStringBytes);
      this.currentTruncated = true;
    }
    // Never start inside a multi-byte UTF-8 character.
    while (start < tail.length && (tail[start] & 0xc0) === 0x80) start += 1;
    tail = tail.subarray(start);
    if (this.currentTruncated) this.truncatedStrings += 1;
    this.emit(Buffer.concat([tail, Buffer.from([QUOTE])]));
    this.views = [];
    this.viewBytes = 0;
    this.inString = false;
  }

  /** The first position at or after `cut` that does not split an escape token, scanning tokens from `safe`. */
  private safeCut(bytes: Buffer, safe: number, cut: number): number {
    let at = bytes.indexOf(BACKSLASH, safe);
    while (at !== -1 && at < cut) {
      const end = at + escapeLength(bytes, at, undefined);
      if (end > cut) return end;
      at = bytes.indexOf(BACKSLASH, end);
    }
    return cut;
  }

  private emit(bytes: Buffer): void {
    if (this.overflow || bytes.length === 0) return;
    this.size += bytes.length;
    if (this.size > this.options.maxTotalBytes) {
      this.overflow = true;
      this.parts.length = 0;
      return;
    }
    this.parts.push(bytes);
  }
}
