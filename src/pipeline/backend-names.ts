import { describeUnknownChoice } from './issue-messages.js';
import type { PipelineDefinition } from './schema.js';
import { BACKENDS } from './stage-options-schema.js';

/**
 * Stage and default `backend:` values that are neither built in nor among `registered` (the names the worker was
 * given with `createPipelineWorker({ backends })`, passed to validation by the client). `clientHint` adds how a client
 * names such a backend (pointless for the workflow's own check). Pure.
 */
export function findUnknownBackends(
  pipeline: PipelineDefinition,
  registered: readonly string[] = [],
  { clientHint = true }: { clientHint?: boolean } = {},
): { path: PropertyKey[]; message: string }[] {
  const allowed = new Set<string>([...BACKENDS, ...registered]);
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const check = (name: unknown, path: PropertyKey[]): void => {
    if (typeof name !== 'string' || allowed.has(name)) return;
    // A custom backend must be named to the client too, else a typo and an unannounced backend look alike.
    problems.push({
      path,
      message:
        describeUnknownChoice('backend', name, [...allowed]) +
        (clientHint ? ` (for a backend registered with the worker, tell the client its name: \`backends: ['${name}']\` or AGENT_PIPELINE_BACKENDS=${name})` : ''),
    });
  };
  check(pipeline.defaults?.backend, ['defaults', 'backend']);
  // Also called on a file that failed the schema, so that every problem is told at once: read it defensively.
  if (Array.isArray(pipeline.stages)) pipeline.stages.forEach((stage, i) => check(stage?.backend, ['stages', i, 'backend']));
  return problems;
}
