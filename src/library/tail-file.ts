import { StringDecoder } from 'node:string_decoder';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

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

/** Opened without following a symlink at the file itself, and without waiting on a FIFO's writer. */
const NO_FOLLOW = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Yields a file's lines; with `follow`, keeps yielding lines appended later (like `tail -f`) until `isDone` or the
 * signal. A partial last line is held back until its newline arrives, or the writer is done.
 */
export async function* readLines(file: string, options: ReadLinesOptions): AsyncGenerator<string> {
  const handle = await open(file, NO_FOLLOW);
  try {
    // Only a regular file: a device or a FIFO would never end, a symlink (refused by the open) leads anywhere.
    if (!(await handle.stat()).isFile()) throw new Error(`${file} is not a regular file`);
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
