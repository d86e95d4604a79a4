import { BACKENDS, type PipelineDefinition } from './schema.js';

/**
 * Stage and default `backend:` values that are neither built in nor among `registered` (the names the worker was
 * given with `createPipelineWorker({ backends })`, passed to validation by the client). Pure.
 */
export function findUnknownBackends(pipeline: PipelineDefinition, registered: readonly string[] = []): { path: PropertyKey[]; message: string }[] {
  const allowed = new Set<string>([...BACKENDS, ...registered]);
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const check = (name: string | undefined, path: PropertyKey[]): void => {
    if (name === undefined || allowed.has(name)) return;
    problems.push({
      path,
      message: `unknown backend "${name}"; expected ${[...allowed].join(', ')}, or a backend registered with the worker (tell the client its name: \`backends: ['${name}']\`)`,
    });
  };
  check(pipeline.defaults?.backend, ['defaults', 'backend']);
  pipeline.stages.forEach((stage, i) => check(stage.backend, ['stages', i, 'backend']));
  return problems;
}
