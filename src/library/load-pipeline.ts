import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parsePipeline, type ParseOptions } from '../pipeline/parse.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import { InvalidRequestError, withCliMessage } from '../errors.js';
import { parseObjectInput } from '../pipeline/object-inputs.js';
import { formatPath } from '../pipeline/errors.js';
import { fillStageOptions } from '../pipeline/stage-option-inputs.js';

/** Reads and validates a pipeline file. @throws InvalidRequestError `FILE_UNREADABLE`, or PipelineValidationError */
export async function loadPipelineFile(file: string, options?: ParseOptions): Promise<{ pipeline: PipelineDefinition; baseDir: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new InvalidRequestError('FILE_UNREADABLE', `[FILE_UNREADABLE] cannot read pipeline file ${file}: ${describeUnreadable(err)}`);
  }
  return { pipeline: parsePipeline(text, file, options), baseDir: path.dirname(path.resolve(file)) };
}

/** Why a pipeline file could not be read, and what to do, for `start` and `validate` alike. */
export function describeUnreadable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? 'no such file; check the path' : code === 'EISDIR' ? 'it is a folder; give the pipeline\'s YAML file' : code === 'EACCES' ? 'permission denied' : (code ?? (err as Error).message);
}

/**
 * Checks the given inputs against the pipeline's declared ones and fills defaults. An input declared `type: object`
 * must be a JSON object of string, number or boolean values; the run carries it as compact JSON text. `origin` says
 * where a value came from (`--input notes=@notes.json`), for messages.
 * @throws InvalidRequestError `INPUT_INVALID`
 */
export function resolveInputs(pipeline: PipelineDefinition, file: string, given: Record<string, string>, origin?: (name: string) => string | undefined): Record<string, string> {
  const declared = pipeline.inputs ?? {};
  const unknown = Object.keys(given).filter((k) => !(k in declared));
  if (unknown.length > 0) {
    throw new InvalidRequestError(
      'INPUT_INVALID',
      `[INPUT_INVALID] ${file} declares no input ${unknown.map((k) => `"${k}"`).join(', ')}; declared inputs: ${Object.keys(declared).join(', ') || '(none)'}`,
    );
  }
  const inputs: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, spec] of Object.entries(declared)) {
    const value = given[name] ?? spec.default;
    if (value === undefined) {
      if (spec.required) missing.push(name);
    } else if (spec.type === 'object') inputs[name] = objectInputText(name, value, file, origin?.(name));
    else inputs[name] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  if (missing.length > 0) {
    const problem = `[INPUT_INVALID] ${file} requires input ${missing.map((k) => `"${k}"`).join(', ')}`;
    throw withCliMessage(
      new InvalidRequestError('INPUT_INVALID', `${problem}; give it in the inputs (the library's \`inputs: { ${missing[0]}: ... }\`, the command's \`--input ${missing[0]}=...\`)`),
      `${problem}; give it with ${missing.map((k) => `\`--input ${k}=...\``).join(' ')}`,
    );
  }
  return inputs;
}

/** An object input's value as the run carries it: compact JSON. @throws InvalidRequestError `INPUT_INVALID` naming the input and its file */
function objectInputText(name: string, value: string | object, file: string, origin: string | undefined): string {
  if (typeof value !== 'string') return JSON.stringify(value);
  const parsed = parseObjectInput(value);
  if ('value' in parsed) return JSON.stringify(parsed.value);
  throw new InvalidRequestError(
    'INPUT_INVALID',
    `[INPUT_INVALID] ${origin ?? `input "${name}"`} of ${file} is \`type: object\`, but ${parsed.problem}; ` +
      'give a JSON object of string, number or boolean values, e.g. ' + `\`inputs: { ${name}: { key: 'value' } }\` (the command: \`--input ${name}=@answers.json\` holding {"key": "value"})`,
  );
}

/**
 * Checks the stage options a run input fills (`timeout: "{{inputs.timeout}}"`) with this run's values, as the run
 * checks them at its start: a value the option cannot take (`--input timeout=soon`), or an input the run lacks, is
 * refused before anything starts, naming the field, the input and the value, rather than starting a run that fails
 * at once. `inputs` are the resolved ones ({@link resolveInputs}).
 * @throws InvalidRequestError `INPUT_INVALID`
 */
export function checkOptionInputs(pipeline: PipelineDefinition, file: string, inputs: Readonly<Record<string, string>>): void {
  const { problems } = fillStageOptions(pipeline, inputs);
  if (problems.length === 0) return;
  const cli = problems.map((p) => `${formatPath(p.path)}: ${p.message}`).join('; ');
  // The run's own messages name the command's flag as the fix; a library caller gives the value in `inputs`.
  const library = cli.replace(/\(pass --input ([^=]+)=…\)/g, '(give another value: `inputs: { $1: ... }`)').replace(/or pass --input ([^=]+)=…\)/g, 'or give it: `inputs: { $1: ... }`)');
  throw withCliMessage(new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] ${file}: ${library}`), `[INPUT_INVALID] ${file}: ${cli}`);
}
