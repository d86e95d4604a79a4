import { StringDecoder } from 'node:string_decoder';
import { setTimeout as sleep } from 'node:timers/promises';
import { openRegularFile } from '../files/regular-file.js';

export interface ReadLinesOptions {
  /** Keep reading as the file grows, until `isDone` says the writer has finished. */
  follow: boolean;
  /** Asked at the end of the file while following; true stops after the last complete line. */
  isDone?: () => Promise<boolean>;
  signal?: AbortSignal;
  /** @unit milliseconds @default 500 */
  pollMs?: number;
  /** Stop after this many bytes, with a last line saying so. @unit bytes @default no limit */
  maxBytes?: number;
}

/**
 * Yields a file's lines; with `follow`, keeps yielding lines appended later (like `tail -f`) until `isDone` or the
 * signal. A partial last line is held back until its newline arrives, or the writer is done.
 */
export async function* readLines(file: string, options: ReadLinesOptions): AsyncGenerator<string> {
  // Only a regular file, never through a symlink at the file itself: a device or a FIFO would never end, a symlink
  // leads anywhere. Followed as it grows, so not capped at its size when opened.
  const { handle } = await openRegularFile(file);
  try {
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    const buffer = Buffer.alloc(64 * 1024);
    // A character split across two reads must not turn into two replacement characters.
    const decoder = new StringDecoder('utf8');
    let position = 0;
    let pending = '';
    let finalPass = false;
    for (;;) {
      if (position >= maxBytes) {
        pending += decoder.end();
        if (pending) yield pending;
        yield `… [stopped reading after ${maxBytes} bytes of ${file}]`;
        return;
      }
      const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, maxBytes - position), position);
      if (bytesRead > 0) {
        position += bytesRead;
        const lines = (pending + decoder.write(buffer.subarray(0, bytesRead))).split('\n');
        pending = lines.pop() ?? '';
        yield* lines;
        continue;
      }
      if (!options.follow || options.signal?.aborted || finalPass) break;
      if (await options.isDone?.()) {
        // The writer finished while we were at the end: read once more for what it wrote meanwhile.
        finalPass = true;
        continue;
      }
      try {
        await sleep(options.pollMs ?? 500, undefined, { signal: options.signal });
      } catch {
        break;
      }
    }
    pending += decoder.end();
    if (pending) yield pending;
  } finally {
    await handle.close();
  }
}
