import { AGENT_ONLY_FIELDS, isCommandStage } from './command-stage.js';
import { promptCandidates } from './prompt-names.js';
import type { RunBundle } from './run-bundle.js';
import type { PipelineDefinition } from './schema.js';
import { agentPipelineCommand, shellWord } from './shell-words.js';
import type { StageDefinition } from './stage-schema.js';

/*
 * What a fork of a run from stage `from` does (docs/forking.md): the stages that completed before `from` first
 * started are taken over as completed, provided their definition and the inputs they read are unchanged; every
 * other stage runs again under the new pipeline. Pure: the caller gives the source run's stages and the time `from`
 * first started (its first-start checkpoint), and both pipelines with their bundles.
 */

/** One side of a fork: a pipeline as it was started (or is to be), its bundle and its inputs. */
export interface ForkSide {
  pipeline: PipelineDefinition;
  /** Absent when the run read its files from the worker (`--files-from-worker`): nothing to compare then. */
  bundle?: RunBundle;
  inputs: Record<string, string>;
}

/** A source stage as its run's state reports it. */
export interface ForkSourceStage {
  id: string;
  status: string;
  finally?: boolean;
  /** @unit milliseconds since the epoch */
  startedAt?: number;
  /** @unit milliseconds since the epoch */
  finishedAt?: number;
  /** Set on a stage the source (itself a fork) took over from its own source: it never ran in the source. */
  carriedCostUsd?: number;
}

/** Why a taken-over stage cannot be: `field` names what changed, as `<stage>.<field>`. */
export interface ForkRefusal {
  stage: string;
  field: string;
  reason: string;
}

export interface ForkPlan {
  takenOver: string[];
  runAgain: string[];
  /** Definition changes are refused unless forced; changed inputs always are. */
  refused: ForkRefusal[];
}

/** Stage fields whose change means a stage would not do what it did: compared as written. */
const ALWAYS_COMPARED = ['model', 'backend', 'needs', 'when'] as const;

/**
 * The plan of a fork from stage `from`, which first started at `fromStartedAt`. With `force`, changed definitions of
 * taken-over stages are not refused (changed inputs they read still are).
 */
export function planFork(source: { side: ForkSide; stages: ForkSourceStage[] }, target: ForkSide, from: string, fromStartedAt: number, force = false): ForkPlan {
  const before = new Map(source.stages.filter((s) => !s.finally && s.status === 'completed' && s.finishedAt !== undefined && s.finishedAt <= fromStartedAt).map((s) => [s.id, s]));
  const oldStages = new Map(source.side.pipeline.stages.map((s) => [s.id, s]));
  const plan: ForkPlan = { takenOver: [], runAgain: [], refused: [] };
  for (const stage of target.pipeline.stages) {
    const old = oldStages.get(stage.id);
    if (stage.id === from || !before.has(stage.id) || !old) {
      plan.runAgain.push(stage.id);
      continue;
    }
    plan.takenOver.push(stage.id);
    if (!force) plan.refused.push(...definitionChanges(stage.id, { side: source.side, stage: old }, { side: target, stage }));
    plan.refused.push(...inputChanges(stage.id, { side: source.side, stage: old }, target));
  }
  for (const stage of target.pipeline.finally ?? []) plan.runAgain.push(stage.id);
  return plan;
}

/**
 * Where a rerun forks from: of the stages the source did not complete, the one that started first (its first-start
 * checkpoint holds the workspace every completed stage before it left). Undefined when none of them ever started.
 */
export function rerunFrom(stages: readonly ForkSourceStage[]): string | undefined {
  const started = stages.filter((s) => !s.finally && s.status !== 'completed' && s.startedAt !== undefined);
  return started.sort((a, b) => a.startedAt! - b.startedAt!)[0]?.id;
}

/** Why a run cannot be forked as asked, and what the person does instead. */
export interface ForkProblem {
  message: string;
  fix: string;
}

/**
 * The stage a fork of run `runId` starts from (`stage`, or a rerun's), or why the run cannot be forked as asked: a
 * lent folder, files read from the worker, no stage to rerun, a stage unknown to either pipeline or never started. The
 * client and the worker both ask, so they refuse alike.
 */
export function forkStart(runId: string, source: { side: ForkSide; stages: readonly ForkSourceStage[]; forkedFrom?: { runId: string } }, target: ForkSide, stage: string | undefined): { from: string } | ForkProblem {
  if (source.side.pipeline.workspace?.dir !== undefined) {
    return { message: `run ${runId} worked in a lent folder (workspace.dir), which it changed in place: there is no earlier state of it to start from`, fix: 'start the pipeline again' };
  }
  if (!source.side.bundle || !target.bundle) {
    const which = source.side.bundle ? 'the fork reads' : `run ${runId} read`;
    return { message: `${which} its pipeline files from the worker (--files-from-worker): there are no file hashes to compare what changed`, fix: 'fork without --files-from-worker, from a run started without it' };
  }
  const from = stage ?? rerunFrom(source.stages);
  if (from === undefined) return { message: `run ${runId} has no stage to run again: every stage completed, or none of the others ever started`, fix: 'fork it with --from STAGE' };
  for (const [side, pipeline] of [[`run ${runId}`, source.side.pipeline], ['the fork\'s pipeline', target.pipeline]] as const) {
    const ids = pipeline.stages.map((s) => s.id);
    if (!ids.includes(from)) return { message: `${side} has no stage ${from} (--from)`, fix: `name one of its stages: ${ids.join(', ')}` };
  }
  const started = source.stages.find((s) => s.id === from);
  if (started?.startedAt === undefined) {
    return { message: `stage ${from} of run ${runId} never started, so there is no workspace of its start to fork from`, fix: 'fork from a stage that started' };
  }
  // A fork's taken-over stage first started in the fork's source: only that run has a checkpoint of its first start.
  if (started.carriedCostUsd !== undefined && source.forkedFrom) {
    const origin = source.forkedFrom.runId;
    return { message: `stage ${from} of run ${runId} was taken over from run ${origin}: it first started there, so only ${origin} has the workspace of its start`, fix: `fork run ${origin} instead: ${agentPipelineCommand('fork', origin, [`--from ${shellWord(from)}`])}` };
  }
  return { from };
}

/** The refusal of a plan whose taken-over stages changed, or undefined when nothing is refused. */
export function describeRefusals(runId: string, refused: readonly ForkRefusal[]): ForkProblem | undefined {
  if (refused.length === 0) return undefined;
  const list = refused.map((r) => `${r.field} (${r.reason})`).join(', ');
  const forceable = refused.some((r) => !r.field.includes('.inputs.'));
  return {
    message: `a stage the fork would take over from run ${runId} changed: ${list}`,
    fix: forceable ? 'fork from an earlier stage, undo the change, or fork with --force to take them over as they completed' : 'fork from an earlier stage, or give the inputs the values the source run had',
  };
}

type Defined = { side: ForkSide; stage: StageDefinition };

/** The fields of stage `id` that differ between the two pipelines: every field of the stage, and its files' hashes. */
function definitionChanges(id: string, old: Defined, now: Defined): ForkRefusal[] {
  const refusals: ForkRefusal[] = [];
  const fields = new Set([...Object.keys(old.stage), ...Object.keys(now.stage), ...ALWAYS_COMPARED]);
  // A command stage takes none of the agents' defaults (`model`, `backend`, …): their change does not change it.
  const ignored = new Set<string>(isCommandStage(old.stage) && isCommandStage(now.stage) ? AGENT_ONLY_FIELDS : []);
  for (const field of [...fields].sort()) {
    if (ignored.has(field)) continue;
    const before = effective(old, field);
    const after = effective(now, field);
    if (stable(before) !== stable(after)) refusals.push({ stage: id, field: `${id}.${field}`, reason: `${field} changed` });
  }
  for (const field of ['prompt', 'agent'] as const) {
    const before = fileHashes(old, field);
    const after = fileHashes(now, field);
    if (before === undefined || after === undefined) continue;
    if (before !== after && !refusals.some((r) => r.field === `${id}.${field}`)) refusals.push({ stage: id, field: `${id}.${field}`, reason: `the content of its ${field} file changed` });
  }
  return refusals;
}

/** A stage's field, or the pipeline's default of it. */
function effective({ side, stage }: Defined, field: string): unknown {
  const own = (stage as Record<string, unknown>)[field];
  return own !== undefined ? own : (side.pipeline.defaults as Record<string, unknown> | undefined)?.[field];
}

/** The bundle hashes of the files a stage's field may name, or undefined without a bundle. */
function fileHashes({ side, stage }: Defined, field: 'prompt' | 'agent'): string | undefined {
  const value = stage[field];
  if (!side.bundle || value === undefined) return undefined;
  const candidates = field === 'agent' ? [value] : promptCandidates(value, side.pipeline.promptsDir);
  return candidates.map((file) => side.bundle!.files[bundlePath(side.bundle!.pipelineDir, file)] ?? '-').join(',');
}

/** The inputs stage `id` reads (its definition or its prompt file names `inputs.<name>`) whose value changed. */
function inputChanges(id: string, old: Defined, target: ForkSide): ForkRefusal[] {
  const text = stable(old.stage) + fileText(old);
  const changed = new Set([...Object.keys(old.side.inputs), ...Object.keys(target.inputs)].filter((name) => old.side.inputs[name] !== target.inputs[name]));
  return [...changed]
    .filter((name) => text.includes(`inputs.${name}`))
    .sort()
    .map((name) => ({ stage: id, field: `${id}.inputs.${name}`, reason: `it read the input ${name}, whose value changed` }));
}

/** The text of a stage's prompt file in its bundle ('' without one). */
function fileText({ side, stage }: Defined): string {
  if (!side.bundle || stage.prompt === undefined) return '';
  const hashes = promptCandidates(stage.prompt, side.pipeline.promptsDir).map((file) => side.bundle!.files[bundlePath(side.bundle!.pipelineDir, file)]);
  return hashes.map((hash) => (hash && side.bundle!.blobs[hash]?.encoding === 'utf8' ? side.bundle!.blobs[hash].data : '')).join('\n');
}

/** `file` (relative to the pipeline's folder) as a bundle path: `/`-separated, `.` and `..` resolved. */
function bundlePath(pipelineDir: string, file: string): string {
  const parts: string[] = [];
  for (const part of `${pipelineDir}/${file}`.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return parts.join('/');
}

/** JSON with sorted keys: two equal values give the same text. */
function stable(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `[${value.map(stable).join(',')}]`;
  if (value && typeof value === 'object') return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stable((value as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(value);
}
