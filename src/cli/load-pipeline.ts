import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parsePipeline } from '../pipeline/parse.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { PipelineRunInput } from '../workflows/messages.js';
import { UsageError } from './errors.js';
import { checkRunInputSize } from './input-size.js';

/** Reads and validates a pipeline file. @throws UsageError or PipelineValidationError */
export async function loadPipelineFile(file: string): Promise<{ pipeline: PipelineDefinition; baseDir: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read pipeline file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { pipeline: parsePipeline(text, file), baseDir: path.dirname(path.resolve(file)) };
}

/** Parses `--input key=value` flags. */
export function parseInputFlags(flags: readonly string[]): Record<string, string> {
  const inputs: Record<string, string> = {};
  for (const flag of flags) {
    const eq = flag.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input ${flag}: expected key=value, for example --input feature="dark mode"`);
    inputs[flag.slice(0, eq)] = flag.slice(eq + 1);
  }
  return inputs;
}

/** Checks the given inputs against the pipeline's declared ones and fills defaults. */
export function resolveInputs(pipeline: PipelineDefinition, file: string, given: Record<string, string>): Record<string, string> {
  const declared = pipeline.inputs ?? {};
  const unknown = Object.keys(given).filter((k) => !(k in declared));
  if (unknown.length > 0) {
    throw new UsageError(
      `${file} declares no input ${unknown.map((k) => `"${k}"`).join(', ')}; declared inputs: ${Object.keys(declared).join(', ') || '(none)'}`,
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
    throw new UsageError(`${file} requires input ${missing.map((k) => `"${k}"`).join(', ')}; pass --input ${missing[0]}=...`);
  }
  return inputs;
}

/**
 * Everything the workflow needs to run a pipeline file with the given `--input` flags.
 * @throws UsageError also when the whole input is over Temporal's payload limit
 */
export async function prepareRun(file: string, inputFlags: readonly string[]): Promise<PipelineRunInput> {
  const { pipeline, baseDir } = await loadPipelineFile(file);
  const input = { pipeline, baseDir, pipelineFile: file, inputs: resolveInputs(pipeline, file, parseInputFlags(inputFlags)) };
  checkRunInputSize(input);
  return input;
}
