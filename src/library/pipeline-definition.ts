import { stringify } from 'yaml';
import { PipelineValidationError } from '../pipeline/errors.js';
import type { PipelineDefinition as ParsedPipeline } from '../pipeline/schema.js';
import type { BuiltinBackendName, StageDefaults as ParsedDefaults } from '../pipeline/stage-options-schema.js';
import type { StageDefinition as ParsedStage } from '../pipeline/stage-schema.js';

/*
 * The types a program writes a pipeline in. They are the schema's types with the backend narrowed to a literal union:
 * `backend: 'anthropic'` fails to compile. Backends registered with the workers are named by the type parameter `B`,
 * which `PipelineClient.connect({ backends: ['echo'] })` infers from the names it is given.
 */

/** A backend a definition may name: `claude-cli`, `anthropic-api`, or one of `B`, the backends registered with the workers. */
export type BackendName<B extends string = never> = BuiltinBackendName | B;

type WithBackend<T, B extends string> = Omit<T, 'backend'> & {
  /** `claude-cli`, `anthropic-api`, or a backend registered with the workers (named in the type parameter). */
  backend?: BackendName<B>;
};

/** One stage of a {@link PipelineDefinition}. */
export type StageDefinition<B extends string = never> = WithBackend<ParsedStage, B>;
/** The `defaults` of a {@link PipelineDefinition}: options every stage gets unless it sets its own. */
export type StageDefaults<B extends string = never> = WithBackend<ParsedDefaults, B>;

/** A pipeline as a program writes it: the fields of a pipeline YAML file, with literal types where the file has a fixed set of values. */
export type PipelineDefinition<B extends string = never> = Omit<ParsedPipeline, 'stages' | 'finally' | 'defaults'> & {
  /** The stages, at least one; each runs once the stages in its `needs` are done, in file order among those ready. */
  stages: StageDefinition<B>[];
  /**
   * Stages that run once the run has ended (completed, failed or cancelled; not terminated), one after the other,
   * with `{{run.status}}` and `{{run.error}}`; their failure is a warning, not the run's outcome.
   */
  finally?: StageDefinition<B>[];
  /** Stage options every stage gets unless it sets its own (`timeout`, `retries`, `model`, `permissionMode` …). */
  defaults?: StageDefaults<B>;
};

/** What to run: the path of a pipeline YAML file, or a definition (see {@link definePipeline}). */
export type PipelineSource<B extends string = never> = string | PipelineDefinition<B>;

/**
 * Types an in-memory pipeline definition with the schema the YAML files use, so an editor checks field names and
 * values as you write: `definePipeline<'echo'>({ ... })` allows the registered backend `echo` besides the built-in
 * ones (`B` is never inferred from the definition, so a misspelt name fails). Returns the definition unchanged;
 * `client.start` validates it as `validate` would a file.
 */
export function definePipeline<B extends string = never>(definition: PipelineDefinition<NoInfer<B>>): PipelineDefinition<B> {
  return definition;
}

/** How problems name an in-memory definition, which has no file: `<definition NAME>`. */
export function definitionName(definition: ParsedPipeline | PipelineDefinition<string>): string {
  return `<definition ${typeof definition?.name === 'string' ? definition.name : '?'}>`;
}

/** A definition as the YAML a file would hold, for the parser. @throws PipelineValidationError when it cannot be written as YAML */
export function definitionYaml(definition: ParsedPipeline | PipelineDefinition<string>, name: string): string {
  try {
    return stringify(definition);
  } catch (err) {
    throw new PipelineValidationError(name, [{ path: '', message: `cannot be written as YAML: ${(err as Error).message}` }]);
  }
}
