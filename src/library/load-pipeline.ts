import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parsePipeline, type ParseOptions } from '../pipeline/parse.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import { InvalidRequestError } from '../errors.js';

/** Reads and validates a pipeline file. @throws InvalidRequestError `FILE_UNREADABLE`, or PipelineValidationError */
export async function loadPipelineFile(file: string, options?: ParseOptions): Promise<{ pipeline: PipelineDefinition; baseDir: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new InvalidRequestError('FILE_UNREADABLE', `[FILE_UNREADABLE] cannot read pipeline file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { pipeline: parsePipeline(text, file, options), baseDir: path.dirname(path.resolve(file)) };
}

/** Checks the given inputs against the pipeline's declared ones and fills defaults. @throws InvalidRequestError `INPUT_INVALID` */
export function resolveInputs(pipeline: PipelineDefinition, file: string, given: Record<string, string>): Record<string, string> {
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
    if (value !== undefined) inputs[name] = value;
    else if (spec.required) missing.push(name);
  }
  if (missing.length > 0) {
    throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] ${file} requires input ${missing.map((k) => `"${k}"`).join(', ')}; pass --input ${missing[0]}=...`);
  }
  return inputs;
}
