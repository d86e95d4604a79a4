import type { ScenarioInput } from '../../src/dev/scenario.js';
import type { PipelineSpec } from './stack.js';

/** A final answer that meets the output contract. */
export function reportText(summary = 'Done.'): string {
  return `Finished.\n\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
}

/** Every request gets the same one-turn answer that meets the contract, with no delay. */
export const INSTANT_REPORT_SCENARIO: ScenarioInput = { rules: [], fallback: { text: reportText() } };

/** Options shared by the generated pipelines. */
export interface PipelineShape {
  name: string;
  stages: number;
  backend?: 'claude-cli' | 'anthropic-api';
  /** Pipeline `defaults` besides the backend (timeouts, tools...). */
  defaults?: Record<string, unknown>;
  /** The task of stage `id`. @default a one-line task naming the stage */
  prompt?: (id: string) => string;
}

function stageIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `s${i + 1}`);
}

/** `s1 → s2 → … → sN`: each stage needs the one before. */
export function linearPipeline(shape: PipelineShape): PipelineSpec {
  const ids = stageIds(shape.stages);
  return {
    name: shape.name,
    defaults: { backend: shape.backend ?? 'claude-cli', ...shape.defaults },
    stages: ids.map((id, i) => ({
      id,
      prompt: shape.prompt?.(id) ?? `Benchmark task for stage ${id}: reply with the report.`,
      ...(i > 0 ? { needs: [ids[i - 1]] } : {}),
    })),
  };
}

/** N independent stages, all ready at once. */
export function parallelPipeline(shape: PipelineShape): PipelineSpec {
  return {
    name: shape.name,
    defaults: { backend: shape.backend ?? 'claude-cli', ...shape.defaults },
    stages: stageIds(shape.stages).map((id) => ({ id, prompt: shape.prompt?.(id) ?? `Benchmark task for stage ${id}: reply with the report.` })),
  };
}
