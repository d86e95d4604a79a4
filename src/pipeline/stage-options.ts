import { toMilliseconds } from './duration.js';
import type { Backend, PipelineDefinition, StageDefinition } from './schema.js';

/** A stage with every option decided: file value, else pipeline `defaults`, else these built-ins. */
export interface ResolvedStage extends Omit<StageDefinition, 'timeout' | 'heartbeatTimeout' | 'stallTimeout'> {
  backend: Backend;
  model: string;
  /** Start-to-close timeout of one attempt. @unit milliseconds */
  timeoutMs: number;
  /** @unit milliseconds */
  heartbeatTimeoutMs: number;
  /** No output for this long kills the agent as stalled. @unit milliseconds */
  stallTimeoutMs: number;
  retries: number;
  needs: string[];
}

/** Built-in defaults, chosen for unattended runs of real agents. */
export const STAGE_DEFAULTS = {
  backend: 'claude-cli',
  model: 'sonnet',
  timeout: '30m',
  heartbeatTimeout: '2m',
  stallTimeout: '5m',
  retries: 3,
} as const;

export function resolveStage(pipeline: PipelineDefinition, stage: StageDefinition): ResolvedStage {
  const defaults = pipeline.defaults ?? {};
  const { timeout, heartbeatTimeout, stallTimeout, ...rest } = { ...defaults, ...stage };
  return {
    ...rest,
    backend: stage.backend ?? defaults.backend ?? STAGE_DEFAULTS.backend,
    model: stage.model ?? defaults.model ?? STAGE_DEFAULTS.model,
    timeoutMs: toMilliseconds(timeout ?? STAGE_DEFAULTS.timeout),
    heartbeatTimeoutMs: toMilliseconds(heartbeatTimeout ?? STAGE_DEFAULTS.heartbeatTimeout),
    stallTimeoutMs: toMilliseconds(stallTimeout ?? STAGE_DEFAULTS.stallTimeout),
    retries: stage.retries ?? defaults.retries ?? STAGE_DEFAULTS.retries,
    needs: stage.needs ?? [],
  };
}
