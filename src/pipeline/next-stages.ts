import { needIds } from './graph.js';
import type { ResolvedStage } from './stage-options.js';

/**
 * The stages that become ready the moment stage `id` completes: not started, needing `id`, and needing nothing else
 * that is not satisfied yet. Used as warm start hints, so it leaves out what would not start at once or runs no
 * agent: stages behind a `when:` condition (which the outputs may turn false), gate-only stages, and every stage
 * when `id` itself waits for a person's approval after its agent. Order follows the file.
 */
export function stagesReadyAfter(
  stages: readonly ResolvedStage[],
  id: string,
  isStarted: (id: string) => boolean,
  isSatisfied: (id: string) => boolean,
): ResolvedStage[] {
  const current = stages.find((s) => s.id === id);
  if (!current || current.approval !== undefined) return [];
  return stages.filter((s) => {
    const needs = needIds(s);
    return (
      s.id !== id &&
      !isStarted(s.id) &&
      !s.gateOnly &&
      s.when === undefined &&
      s.approval === undefined &&
      needs.includes(id) &&
      needs.every((need) => need === id || isSatisfied(need))
    );
  });
}
