import type { PayloadCodec } from '@temporalio/common';
import path from 'node:path';
import { bundleMaxBytesFromEnv, createRunBundle } from '../bundle/create-run-bundle.js';
import { checkRunInputSize, RUN_INPUT_MAX_BYTES_WITH_STORE } from './input-size.js';
import { inputOrigins, readInputValues, type InputValue } from './input-files.js';
import { checkOptionInputs, loadPipelineFile, resolveInputs } from './load-pipeline.js';
import { extraBackendNames } from '../config.js';
import { claimCheckCodecOf } from '../codec/claim-check-codec.js';
import { clientCodecsFromEnv } from './connection.js';
import { PipelineValidationError } from '../pipeline/errors.js';
import { parsePipeline } from '../pipeline/parse.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { PipelineInvalidError } from './errors.js';
import { definitionName, definitionYaml, type PipelineSource as PipelineSourceOf } from './pipeline-definition.js';
import { assertValid, validatePipeline } from './validate-pipeline.js';

/** What to run, as the library's own modules take it: a file's path, or a definition with any backend name. */
export type PipelineSource = PipelineSourceOf<string>;

/** How to turn a pipeline source into a run's input. */
export interface PrepareRunOptions {
  /**
   * Values for the pipeline's declared `inputs`; defaults fill the rest. A value `{ file: path }` is read from that
   * file (`{ file: '-' }`: standard input) as UTF-8 text, at most 2 MB (see {@link readInputValues}).
   */
  inputs?: Record<string, InputValue>;
  /** How messages name an input read from a file (`--input notes=@notes.md`). @default `input "notes" ({ file: "notes.md" })` */
  describeInputFile?(name: string, file: string): string;
  /**
   * Folder that agent, prompt and context paths of an in-memory definition resolve against, on the worker.
   * A file's own folder is used for a path. @default `process.cwd()`
   */
  baseDir?: string;
  /** Backend names the workers were given besides the built-in ones, so `backend:` may name them (added to `AGENT_PIPELINE_BACKENDS`). */
  backends?: readonly string[];
  /**
   * Leave the files out of the run: workers read the agent, prompt and context files from `baseDir` on their own
   * host, only when it lies in a folder of their `AGENT_PIPELINE_PIPELINE_DIRS` (else the run fails `RUN_NOT_TRUSTED`).
   * Without it the pipeline, a file or a definition, and every file it references travel in the run, covered by its
   * signature (see `bundle/create-run-bundle.ts`). @default false
   */
  filesFromWorker?: boolean;
  /** Cap on the bundled files. @unit bytes @default `AGENT_PIPELINE_BUNDLE_MAX_BYTES`, else 1 MiB */
  maxBundleBytes?: number;
  /**
   * Check the files the pipeline names before starting, as `validate` does (agent, prompt, context and system prompt
   * files, folders, the templates in them). `false` for files only the workers' host has: the pipeline and its inline
   * templates are still checked. @default true
   */
  checkFiles?: boolean;
}

/**
 * Loads and validates a pipeline (file or definition) with the checks of `agent-pipeline validate`, checks the
 * inputs against its declared ones, and the input's size as `codecs` (the client's payload codecs; by default those
 * of `AGENT_PIPELINE_ENCRYPTION_KEY`) will send it.
 * @throws PipelineInvalidError listing every problem; InvalidRequestError (`FILE_UNREADABLE`, `INPUT_INVALID`,
 *   `INPUT_TOO_LARGE`); ConfigError when the encryption key is malformed.
 */
export async function prepareRunInput(
  source: PipelineSource,
  options: PrepareRunOptions = {},
  codecs: readonly PayloadCodec[] = clientCodecsFromEnv(),
): Promise<PipelineRunInput> {
  const describe = options.describeInputFile ?? ((name: string, file: string) => `input "${name}" ({ file: ${JSON.stringify(file)} })`);
  // With a store, large inputs travel by reference (the claim check): an input file may hold far more.
  const maxBytes = claimCheckCodecOf(codecs)?.claimsToStore ? RUN_INPUT_MAX_BYTES_WITH_STORE : undefined;
  const given = await readInputValues(options.inputs ?? {}, { describe, ...(maxBytes ? { maxBytes } : {}) });
  const origin = inputOrigins(options.inputs ?? {}, describe);
  const backends = [...(options.backends ?? []), ...extraBackendNames()];
  try {
    if (typeof source === 'string') {
      const { pipeline, baseDir } = await loadPipelineFile(source, { backends });
      assertValid(await validatePipeline(source, { backends, checkFiles: options.checkFiles }));
      const inputs = resolveInputs(pipeline, source, given, origin);
      checkOptionInputs(pipeline, source, inputs);
      const bundle = options.filesFromWorker ? undefined : await createRunBundle(source, pipeline, { maxBytes: options.maxBundleBytes ?? bundleMaxBytesFromEnv() });
      return await checkRunInputSize({ pipeline, baseDir, pipelineFile: source, inputs, ...withBackends(backends), ...(bundle ? { bundle } : {}) }, undefined, codecs);
    }
    const name = definitionName(source);
    // The same parser as for files, so a definition is held to exactly the rules a YAML file is.
    const pipeline = parsePipeline(definitionYaml(source, name), name, { backends });
    const baseDir = path.resolve(options.baseDir ?? process.cwd());
    assertValid(await validatePipeline(source, { baseDir, backends, checkFiles: options.checkFiles }));
    const inputs = resolveInputs(pipeline, name, given, origin);
    checkOptionInputs(pipeline, name, inputs);
    // Bundled like a file: its YAML stands as a pipeline file in baseDir, beside the agent and step files it names,
    // so a signature covers every text the run reads.
    const bundle = options.filesFromWorker || options.checkFiles === false ? undefined : await createRunBundle(path.join(baseDir, definitionFileName(pipeline.name)), pipeline, {
      maxBytes: options.maxBundleBytes ?? bundleMaxBytesFromEnv(),
      pipelineText: definitionYaml(source, name),
      label: name,
    });
    return await checkRunInputSize({ pipeline, baseDir, pipelineFile: name, inputs, ...withBackends(backends), ...(bundle ? { bundle } : {}) }, undefined, codecs);
  } catch (err) {
    if (!(err instanceof PipelineValidationError)) throw err;
    // The parser's list lacks what validate checks in the files and templates: refuse with validate's whole list.
    const baseDir = typeof source === 'string' ? undefined : path.resolve(options.baseDir ?? process.cwd());
    assertValid(await validatePipeline(source, { ...(baseDir ? { baseDir } : {}), backends, checkFiles: options.checkFiles }));
    throw PipelineInvalidError.from(err, typeof source === 'string');
  }
}

/** The custom backend names the run may use, for the workflow's own check of its input (absent when there are none). */
function withBackends(backends: readonly string[]): { backends?: string[] } {
  return backends.length > 0 ? { backends: [...new Set(backends)] } : {};
}

/** The name a definition's YAML has in its run's bundle (it has no file of its own). */
function definitionFileName(pipelineName: string): string {
  return `${pipelineName.replace(/[^A-Za-z0-9._-]/g, '_')}.pipeline.yaml`;
}
