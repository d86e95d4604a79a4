import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { redactSecrets } from '../../secrets.js';

/**
 * The transcript of one Messages API attempt, one JSON object per line, in the shapes the Claude
 * Code CLI's `stream-json` uses, so one reader shows both backends' transcripts:
 * - `{"type":"system","subtype":"init","backend":"anthropic-api","model","session_id","request":{…}}`:
 *   a summary of the request (sizes and the start of the prompt; never headers or keys);
 * - `{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text"}}}`
 *   for each streamed chunk, written as it arrives, so a killed attempt keeps its partial answer;
 * - `{"type":"assistant","message":{…}}` with the whole answer, then
 *   `{"type":"result","subtype":"success"|"error",…}` (on failure: `error.type` and `error.message`).
 */
export class ApiTranscript {
  private constructor(private readonly out: WriteStream) {}

  static async open(file: string): Promise<ApiTranscript> {
    await mkdir(path.dirname(file), { recursive: true });
    return new ApiTranscript(createWriteStream(file, { flags: 'a' }));
  }

  write(event: Record<string, unknown>): void {
    this.out.write(`${JSON.stringify(redactSecrets(event))}\n`);
  }

  text(delta: string): void {
    this.write({ type: 'stream_event', event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: delta } } });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.out.end(resolve));
  }
}
