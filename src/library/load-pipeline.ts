import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parsePipeline, type ParseOptions } from '../pipeline/parse.js';
import type { PipelineDefinition } from '../pipeline/schema.js';
import { UsageError } from '../cli/errors.js';

/** Reads and validates a pipeline file. @throws UsageError or PipelineValidationError */
export async function loadPipelineFile(file: string, options?: ParseOptions): Promise<{ pipeline: PipelineDefinition; baseDir: string }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`[FILE_UNREADABLE] cannot read pipeline file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return { pipeline: parsePipeline(text, file, options), baseDir: path.dirname(path.resolve(file)) };
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
    throw new UsageError(`[INPUT_INVALID] ${file} requires input ${missing.map((k) => `"${k}"`).join(', ')}; pass --input ${missing[0]}=...`);
  }
  return inputs;
}
