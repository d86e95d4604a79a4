import { readRegularFile, RegularFileError } from '../files/regular-file.js';
import { InvalidRequestError } from '../errors.js';
import { formatBytes, TEMPORAL_PAYLOAD_LIMIT_BYTES } from './input-size.js';

/**
 * A pipeline input's value: the text itself, or `{ file }` to read it from a file (`{ file: '-' }`: from standard
 * input). What `--input name=@file` and `--input name=@-` stand for. The file is read as UTF-8 on the machine that
 * starts the run; the run carries its text, never the path.
 */
export type InputValue = string | { file: string } | { object: Record<string, string | number | boolean> };

/** The file name that stands for standard input. */
export const STDIN_FILE = '-';
/**
 * The most an input file may hold: what fits in one Temporal payload with nothing else. With a store
 * (`AGENT_PIPELINE_STORE`), RUN_INPUT_MAX_BYTES_WITH_STORE (library/input-size.ts) instead. @unit bytes
 */
export const INPUT_FILE_MAX_BYTES = TEMPORAL_PAYLOAD_LIMIT_BYTES;

/** Options of {@link readInputValues}. */
export interface ReadInputValuesOptions {
  /** How errors name the input: `--input notes=@notes.md` on the command line. @default `input "notes" ({ file: "notes.md" })` */
  describe?(name: string, file: string): string;
  /** Standard input, for `{ file: '-' }`. @default process.stdin */
  stdin?: NodeJS.ReadableStream;
  /** @unit bytes @default INPUT_FILE_MAX_BYTES */
  maxBytes?: number;
}

/**
 * The inputs with every `{ file }` value replaced by the file's text.
 * @throws InvalidRequestError `FILE_NOT_FOUND`, `FILE_UNREADABLE` (not a regular file, not UTF-8, unreadable),
 *   `INPUT_TOO_LARGE` (over `maxBytes`), `INPUT_INVALID` (standard input named twice); each names the input and file.
 */
export async function readInputValues(inputs: Readonly<Record<string, InputValue>>, options: ReadInputValuesOptions = {}): Promise<Record<string, string>> {
  const describe = options.describe ?? ((name: string, file: string) => `input "${name}" ({ file: ${JSON.stringify(file)} })`);
  const fromStdin = Object.entries(inputs).filter(([, v]) => isObject(v) && 'file' in v && v.file === STDIN_FILE).map(([name]) => name);
  if (fromStdin.length > 1) {
    const named = fromStdin.map((name) => describe(name, STDIN_FILE)).join(' and ');
    throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] ${named} both read standard input, which can be read once; put one of them in a file`);
  }
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(inputs)) {
    if (typeof value === 'string') values[name] = value;
    else if (isObject(value) && 'file' in value && typeof value.file === 'string') values[name] = await readInputFile(value.file, describe(name, value.file), options);
    // An object input's value given as an object; the pipeline's `type: object` checks its shape.
    else if (isObject(value) && 'object' in value && value.object !== null && typeof value.object === 'object' && !Array.isArray(value.object)) values[name] = JSON.stringify(value.object);
    else throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] input "${name}": expected a string, { file: path } or { object: {...} }, got ${JSON.stringify(value)}`);
  }
  return values;
}

async function readInputFile(file: string, what: string, options: ReadInputValuesOptions): Promise<string> {
  const maxBytes = options.maxBytes ?? INPUT_FILE_MAX_BYTES;
  const tooLarge = (bytes: string): InvalidRequestError =>
    new InvalidRequestError(
      'INPUT_TOO_LARGE',
      `[INPUT_TOO_LARGE] ${what}: ${file === STDIN_FILE ? 'standard input' : file} holds ${bytes}, over the ${formatBytes(maxBytes)} an input may hold${maxBytes === INPUT_FILE_MAX_BYTES ? ' (one Temporal payload; set AGENT_PIPELINE_STORE to the workers\' store for more)' : ''}. ` +
        'Put large text in a file next to the pipeline and list it under `context:` instead.',
    );
  const data = file === STDIN_FILE ? await readStream(options.stdin ?? process.stdin, maxBytes, tooLarge) : await readFileCapped(file, what, maxBytes, tooLarge);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(data);
  } catch {
    throw new InvalidRequestError('FILE_UNREADABLE', `[FILE_UNREADABLE] ${what}: ${file === STDIN_FILE ? 'standard input' : file} is not UTF-8 text; an input is text`);
  }
}

async function readFileCapped(file: string, what: string, maxBytes: number, tooLarge: (bytes: string) => Error): Promise<Buffer> {
  // Checked on the file as opened (a FIFO's open would wait for a writer; a path checked, then opened again, may lead
  // elsewhere by then), following a symlink as a user naming a file expects.
  return readRegularFile(file, { follow: true, maxBytes }).catch((err: NodeJS.ErrnoException) => {
    if (err instanceof RegularFileError && err.code === 'EFBIG') throw tooLarge(formatBytes(err.bytes ?? 0));
    if (err instanceof RegularFileError) throw new InvalidRequestError('FILE_UNREADABLE', `[FILE_UNREADABLE] ${what}: ${file} is not a regular file (a folder, device or pipe); give the path of a text file`);
    const code = err.code === 'ENOENT' ? 'FILE_NOT_FOUND' : 'FILE_UNREADABLE';
    const why = err.code === 'ENOENT' ? 'no such file' : (err.code ?? err.message);
    throw new InvalidRequestError(code, `[${code}] ${what}: cannot read ${file} (${why}); give the path of a text file, or @@ to start a value with @`);
  });
}

/** Reads a stream to its end, giving up (without reading the rest) as soon as it holds more than `maxBytes`. */
async function readStream(stream: NodeJS.ReadableStream, maxBytes: number, tooLarge: (bytes: string) => Error): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    total += buffer.byteLength;
    if (total > maxBytes) throw tooLarge(`more than ${formatBytes(maxBytes)}`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

/** Where each input given as `{ file }` came from, as `describe` words it, for messages about its content. */
export function inputOrigins(inputs: Readonly<Record<string, InputValue>>, describe: (name: string, file: string) => string): (name: string) => string | undefined {
  return (name) => {
    const value = Object.hasOwn(inputs, name) ? inputs[name] : undefined;
    return value && typeof value === 'object' && 'file' in value ? describe(name, value.file) : undefined;
  };
}

/** Values come from callers' code: a number or `null` must be reported, not crash `in`. */
function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}
