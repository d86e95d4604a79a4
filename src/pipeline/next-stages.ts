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
  const { byId, dependents } = graphOf(stages);
  const current = byId.get(id);
  if (!current || current.approval !== undefined) return [];
  // Only the stages that need it can follow it: looking at every stage made each attempt grow with the run.
  return (dependents.get(id) ?? []).filter((s) => {
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

/** The stages by id, and the stages that need each (in pipeline order), made once per list of stages. */
const graphs = new WeakMap<readonly ResolvedStage[], { byId: Map<string, ResolvedStage>; dependents: Map<string, ResolvedStage[]> }>();

function graphOf(stages: readonly ResolvedStage[]): { byId: Map<string, ResolvedStage>; dependents: Map<string, ResolvedStage[]> } {
  let graph = graphs.get(stages);
  if (!graph) {
    graph = { byId: new Map(stages.map((s) => [s.id, s])), dependents: new Map() };
    for (const stage of stages) for (const need of new Set(needIds(stage))) graph.dependents.set(need, [...(graph.dependents.get(need) ?? []), stage]);
    graphs.set(stages, graph);
  }
  return graph;
}
