/** The stage graph: dependency checks at load time and readiness at run time. Pure. */

/** A `needs` entry as written: an id, or `{stage, allowFailure}`. */
export type NeedEntry = string | { stage: string; allowFailure?: boolean };

interface StageNode {
  id: string;
  needs?: readonly NeedEntry[];
}

/** The ids of the stages `stage` needs, whichever way each entry is written. */
export function needIds(stage: StageNode): string[] {
  return (stage.needs ?? []).map((need) => (typeof need === 'string' ? need : need.stage));
}

/** The `needs` entries of `stage` that allow the needed stage to fail (`{stage, allowFailure: true}`). */
export function allowedFailures(stage: StageNode): string[] {
  return (stage.needs ?? []).flatMap((need) => (typeof need === 'object' && need.allowFailure ? [need.stage] : []));
}

/** Problems with stage ids and `needs`: duplicates, unknown stages, self-references and cycles. */
export function findGraphProblems(stages: readonly StageNode[]): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const ids = new Set<string>();
  stages.forEach((stage, i) => {
    if (ids.has(stage.id)) problems.push({ path: ['stages', i, 'id'], message: `duplicate stage id "${stage.id}"` });
    ids.add(stage.id);
  });
  stages.forEach((stage, i) => {
    needIds(stage).forEach((need, j) => {
      if (need === stage.id) problems.push({ path: ['stages', i, 'needs', j], message: `stage "${stage.id}" cannot need itself` });
      else if (!ids.has(need)) {
        problems.push({ path: ['stages', i, 'needs', j], message: `unknown stage "${need}"; known stages: ${[...ids].join(', ')}` });
      }
    });
  });
  if (problems.length === 0) {
    const cycle = findCycle(stages);
    if (cycle) {
      const index = stages.findIndex((s) => s.id === cycle[0]);
      problems.push({ path: ['stages', index, 'needs'], message: `dependency cycle: ${cycle.join(' -> ')}` });
    }
  }
  return problems;
}

function findCycle(stages: readonly StageNode[]): string[] | undefined {
  const needs = new Map(stages.map((s) => [s.id, needIds(s)]));
  const state = new Map<string, 'visiting' | 'done'>();
  const trail: string[] = [];
  const visit = (id: string): string[] | undefined => {
    if (state.get(id) === 'done') return undefined;
    if (state.get(id) === 'visiting') return [...trail.slice(trail.indexOf(id)), id];
    state.set(id, 'visiting');
    trail.push(id);
    for (const need of needs.get(id) ?? []) {
      const cycle = visit(need);
      if (cycle) return cycle;
    }
    trail.pop();
    state.set(id, 'done');
    return undefined;
  };
  for (const stage of stages) {
    const cycle = visit(stage.id);
    if (cycle) return cycle;
  }
  return undefined;
}

/**
 * Stages that may start now: not started yet, and every stage they need is satisfied (completed, or skipped
 * in a way that lets dependents run; or failed, where the entry has `allowFailure`). Order follows the file,
 * so runs are deterministic.
 */
export function findReadyStages(
  stages: readonly StageNode[],
  isStarted: (id: string) => boolean,
  isSatisfied: (id: string, allowFailure: boolean) => boolean,
): string[] {
  return stages
    .filter((s) => {
      if (isStarted(s.id)) return false;
      const allowed = allowedFailures(s);
      return needIds(s).every((id) => isSatisfied(id, allowed.includes(id)));
    })
    .map((s) => s.id);
}

/**
 * The stages that can no longer run because `failed` failed: those that need it without `allowFailure`, and
 * everything that needs one of those. A stage that allows the failure (and what follows it) still runs. File order.
 */
export function findBlockedDependents(stages: readonly StageNode[], failed: string): string[] {
  const blocked = new Set<string>();
  for (let changed = true; changed; ) {
    changed = false;
    for (const stage of stages) {
      if (blocked.has(stage.id)) continue;
      const allowed = allowedFailures(stage);
      const needs = needIds(stage);
      if ((needs.includes(failed) && !allowed.includes(failed)) || needs.some((id) => blocked.has(id))) {
        blocked.add(stage.id);
        changed = true;
      }
    }
  }
  return stages.filter((s) => blocked.has(s.id)).map((s) => s.id);
}

/** Every stage `id` needs, directly or through other stages. */
export function findAncestors(stages: readonly StageNode[], id: string): Set<string> {
  const needs = new Map(stages.map((s) => [s.id, needIds(s)]));
  const found = new Set<string>();
  const visit = (current: string): void => {
    for (const need of needs.get(current) ?? []) {
      if (!found.has(need)) {
        found.add(need);
        visit(need);
      }
    }
  };
  visit(id);
  return found;
}

/**
 * What a reviewer's `rework` verdict runs again, in file order: the reviewed stages, the stages between them
 * and the reviewer (those that need a reviewed stage and that the reviewer needs), and the reviewer itself.
 * Stages beside that path keep their results.
 */
export function findReworkStages(stages: readonly StageNode[], reviewer: string, reviewed: readonly string[]): string[] {
  const beforeReviewer = findAncestors(stages, reviewer);
  return stages
    .filter((s) => {
      if (s.id === reviewer || reviewed.includes(s.id)) return true;
      if (!beforeReviewer.has(s.id)) return false;
      const ancestors = findAncestors(stages, s.id);
      return reviewed.some((r) => ancestors.has(r));
    })
    .map((s) => s.id);
}
