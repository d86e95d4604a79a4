import type { z } from 'zod';
import { pipelineSchema, type PipelineDefinition } from './schema.js';

/*
 * A pipeline that fails the schema, made into one that passes by taking out what is wrong, so that the checks after
 * the schema (stage graph, templates, files) still run on the rest and a file's every problem is told in one pass.
 * What was taken out is remembered as scopes: a later check's problem inside one is a follow-on of the schema error
 * (or a check made impossible by it) and is left out. Pure.
 */

/** A zod issue's parts that salvage uses. */
export interface SalvageIssue {
  readonly code: string;
  readonly path: readonly PropertyKey[];
  readonly keys?: readonly string[];
}

/** The pipeline with its wrong parts taken out, the schema issues met on the way, and where later checks are skipped. */
export interface Salvage {
  /** Undefined when nothing usable is left (no `stages` list, not an object). */
  pipeline?: PipelineDefinition;
  /** Issues found after a first removal (a check zod runs only once an object's fields pass). */
  laterIssues: z.core.$ZodIssue[];
  /** Paths whose later problems are follow-ons of a schema error. */
  skipped: PropertyKey[][];
}

/** Rounds of removal before giving up: each round clears every issue it sees, and new ones only appear one level up. */
const MAX_ROUNDS = 6;

/** Takes out of `data` (not changed) the parts `issues` point at, until it passes the schema. */
export function salvagePipeline(data: unknown, issues: readonly SalvageIssue[]): Salvage {
  const copy: unknown = structuredClone(data);
  const skipped: PropertyKey[][] = [];
  const laterIssues: z.core.$ZodIssue[] = [];
  let current: readonly SalvageIssue[] = issues;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    for (const issue of current) {
      const targets = issue.code === 'unrecognized_keys' ? (issue.keys ?? []).map((k) => [...issue.path, k]) : [cutAtList(issue.path)];
      for (const target of targets) if (!removeAt(copy, target, skipped)) return { laterIssues, skipped };
    }
    const parsed = pipelineSchema.safeParse(copy, { reportInput: true });
    if (parsed.success) return { pipeline: parsed.data, laterIssues, skipped };
    current = parsed.error.issues;
    laterIssues.push(...parsed.error.issues.filter((issue) => !isInside(issue.path, skipped) && !isCrossFieldFollowOn(issue, skipped)));
  }
  return { laterIssues, skipped };
}

/** Whether `path` lies inside one of `scopes` (or is one). */
export function isInside(path: readonly PropertyKey[], scopes: readonly (readonly PropertyKey[])[]): boolean {
  return scopes.some((scope) => scope.length <= path.length && scope.every((part, i) => part === path[i]));
}

/** A check across a stage's fields (`custom`) on a stage that lost a field: it would judge what is no longer there (`run:`). */
function isCrossFieldFollowOn(issue: SalvageIssue, skipped: readonly PropertyKey[][]): boolean {
  return issue.code === 'custom' && isStagePath(issue.path) && skipped.some((scope) => isStagePath(scope) && scope[0] === issue.path[0] && scope[1] === issue.path[1]);
}

/** A bad entry of a list inside a stage (`needs[2]`) takes the list out, so that later indexes keep their meaning. */
function cutAtList(path: readonly PropertyKey[]): PropertyKey[] {
  const start = isStagePath(path) ? 3 : 1;
  const index = path.findIndex((part, i) => i >= start && typeof part === 'number');
  return [...(index < 0 ? path : path.slice(0, index))];
}

function isStagePath(path: readonly PropertyKey[]): boolean {
  return (path[0] === 'stages' || path[0] === 'finally') && typeof path[1] === 'number';
}

/**
 * Takes out the value at `target`; where there is none (a required field is missing), its parent goes, up to the
 * stage, which becomes a stand-in gate keeping its id. False when the pipeline itself is unusable.
 */
function removeAt(root: unknown, target: readonly PropertyKey[], skipped: PropertyKey[][]): boolean {
  if (target.length === 0 || (target.length === 1 && target[0] === 'stages')) return false;
  if (target.length === 1 && target[0] === 'name') return setName(root, skipped);
  if (isStagePath(target) && target.length === 2) return standIn(root, target, skipped);
  const parent = getAt(root, target.slice(0, -1));
  const key = target[target.length - 1] as string;
  if (!isRecord(parent) || !Object.hasOwn(parent, key)) return removeAt(root, target.slice(0, -1), skipped);
  delete parent[key];
  skipped.push(scopeOf(target));
  return true;
}

/**
 * What a removal makes impossible to check: a stage's field stands for itself, except `needs` (without it, what the
 * stage may read is unknown); a nested field stands for its object (`approval.timeout` for `approval.onTimeout`).
 */
function scopeOf(target: readonly PropertyKey[]): PropertyKey[] {
  if (isStagePath(target)) return target[2] === 'needs' ? target.slice(0, 2) : target.slice(0, Math.min(target.length, 3));
  return target.length <= 1 ? [...target] : target.slice(0, -1);
}

/** A stage that cannot be used as written: kept as an approval gate with its id, so stages needing it still do. */
function standIn(root: unknown, target: readonly PropertyKey[], skipped: PropertyKey[][]): boolean {
  const list = getAt(root, target.slice(0, 1));
  const index = target[1] as number;
  if (!Array.isArray(list) || index >= list.length) return false;
  const stage: unknown = list[index];
  const id = isRecord(stage) && typeof stage.id === 'string' && /^[A-Za-z][A-Za-z0-9_-]*$/.test(stage.id) ? stage.id : `invalid-stage-${String(target[0])}-${index}`;
  // Its `needs` stay (removed next round if they are what is wrong): later stages still run after what it needs.
  list[index] = { id, approval: true, ...(isRecord(stage) && stage.needs !== undefined ? { needs: stage.needs } : {}) };
  skipped.push([...target]);
  return true;
}

function setName(root: unknown, skipped: PropertyKey[][]): boolean {
  if (!isRecord(root)) return false;
  root.name = 'pipeline';
  skipped.push(['name']);
  return true;
}

function getAt(root: unknown, path: readonly PropertyKey[]): unknown {
  return path.reduce<unknown>((node, part) => (isRecord(node) || Array.isArray(node) ? (node as Record<PropertyKey, unknown>)[part] : undefined), root);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
