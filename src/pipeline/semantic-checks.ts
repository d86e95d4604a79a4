import { findStageOptionTemplateProblems } from './stage-option-inputs.js';
import { ConditionSyntaxError, listConditionReferences, parseCondition, type ConditionNode } from './condition.js';
import { allowedFailures, findAncestors } from './graph.js';
import { findLimitProblems } from './limits.js';
import { listReferencedFiles } from './referenced-files.js';
import { leavesFolder } from './relative-paths.js';
import { promptSettings } from './agent-prompt.js';
import { formatDuration, toMilliseconds } from './duration.js';
import type { PipelineDefinition } from './schema.js';
import type { StageDefinition } from './stage-schema.js';
import { STAGE_DEFAULTS } from './stage-options.js';
import { findInputDefaultProblems } from './object-inputs.js';

/**
 * Checks that need the whole pipeline, after the schema and the stage graph passed: reviews name stages the
 * reviewer comes after, `when:` conditions parse and refer to earlier stages and declared inputs, `context` and
 * stage `inputs` paths stay inside their folders. Pure.
 */
export function findSemanticProblems(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const ids = pipeline.stages.map((s) => s.id);
  problems.push(...findEscapingFiles(pipeline), ...findSharedOutputs(pipeline), ...findInputDefaultProblems(pipeline.inputs), ...findStageOptionTemplateProblems(pipeline));
  for (const [i, entry] of (pipeline.context ?? []).entries()) {
    const file = typeof entry === 'string' ? entry : entry.path;
    if (leavesFolder(file)) {
      problems.push({ path: typeof entry === 'string' ? ['context', i] : ['context', i, 'path'], message: `"${file}" leaves the pipeline file's folder; context files are read relative to it, so keep them in that folder or below it` });
    }
  }
  pipeline.stages.forEach((stage, i) => {
    const ancestors = findAncestors(pipeline.stages, stage.id);
    if (stage.review) {
      const reviewed = typeof stage.review.of === 'string' ? [stage.review.of] : stage.review.of;
      const path = ['stages', i, 'review', 'of'];
      for (const of of reviewed) {
        if (of === stage.id) problems.push({ path, message: `stage "${stage.id}" cannot review itself; name the stage whose work it reviews` });
        else if (!ids.includes(of)) problems.push({ path, message: `unknown stage "${of}"; known stages: ${ids.join(', ')}` });
        else if (!ancestors.has(of)) {
          problems.push({
            path,
            message: `stage "${stage.id}" reviews "${of}" but does not run after it; add "${of}" (or a stage that needs it) to its needs`,
          });
        }
      }
    }
    if (stage.when !== undefined) problems.push(...checkCondition(pipeline, stage.when, stage.id, ancestors).map((message) => ({ path: ['stages', i, 'when'], message })));
    for (const [j, input] of (stage.inputs ?? []).entries()) {
      const file = typeof input === 'string' ? input : input.path;
      if (!leavesFolder(file)) continue;
      problems.push({
        path: typeof input === 'string' ? ['stages', i, 'inputs', j] : ['stages', i, 'inputs', j, 'path'],
        message: `"${file}" leaves the run's workspace; stage inputs are files earlier stages wrote in it, given relative to it (e.g. "docs/spec.md")`,
      });
    }
    if (typeof stage.approval === 'object' && stage.approval.onTimeout && stage.approval.timeout === undefined) {
      problems.push({ path: ['stages', i, 'approval', 'onTimeout'], message: 'onTimeout needs a timeout, e.g. `timeout: 24h`' });
    }
    for (const id of allowedFailures(stage)) {
      const needed = pipeline.stages.find((s) => s.id === id);
      if (needed && !needed.continueOnFailure) {
        const j = (stage.needs ?? []).findIndex((n) => typeof n === 'object' && n.stage === id);
        problems.push({
          path: ['stages', i, 'needs', j, 'allowFailure'],
          message: `stage "${stage.id}" allows "${id}" to fail, but a failure of "${id}" would end the run first; add \`continueOnFailure: true\` to stage "${id}"`,
        });
      }
    }
    problems.push(...checkPromptDeadline(pipeline, stage, i));
    problems.push(...checkExpects(stage.expects, ['stages', i, 'expects']));
    problems.push(...checkOutput(stage.output, ['stages', i, 'output']));
    if (stage.review && (stage.contract ?? pipeline.defaults?.contract) === 'none') {
      problems.push({ path: ['stages', i, 'review'], message: 'a reviewer gives its verdict in the report block; set `contract: json` on this stage' });
    }
  });
  (pipeline.finally ?? []).forEach((stage, i) => problems.push(...checkPromptDeadline(pipeline, stage, i, 'finally')));
  problems.push(...checkFinallyStages(pipeline), ...findAllLimitProblems(pipeline));
  return problems;
}

/**
 * A mid-turn prompt holds the attempt (its agent and worker slot) while it waits: the stage's start-to-close `timeout`
 * must outlast the prompt's deadline, or Temporal would end the attempt in the middle of a person's decision.
 */
function checkPromptDeadline(pipeline: PipelineDefinition, stage: StageDefinition, i: number, list: 'stages' | 'finally' = 'stages'): { path: PropertyKey[]; message: string }[] {
  const merged = { ...pipeline.defaults, ...stage };
  if (merged.onPermissionRequest !== 'ask') return [];
  const backend = merged.backend ?? STAGE_DEFAULTS.backend;
  if (backend !== 'claude-cli') {
    return [{ path: [list, i, 'onPermissionRequest'], message: `only the claude-cli backend asks mid-turn; stage "${stage.id}" runs on ${backend}, so drop \`onPermissionRequest: ask\` or use backend claude-cli` }];
  }
  const wait = promptSettings(merged).timeoutMs;
  const stageTimeout = toMilliseconds(merged.timeout ?? STAGE_DEFAULTS.timeout);
  if (wait < stageTimeout) return [];
  const path = stage.permissionRequest?.timeout !== undefined ? [list, i, 'permissionRequest', 'timeout'] : [list, i, 'timeout'];
  return [{ path, message: `a permission request waits up to ${formatDuration(wait)}, which the stage's timeout of ${formatDuration(stageTimeout)} does not outlast; raise \`timeout\` or lower \`permissionRequest.timeout\`` }];
}

/** `finally` stages run one after another once the run has ended: ids of their own, no `needs` or `review`. */
function checkFinallyStages(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const seen = new Set(pipeline.stages.map((s) => s.id));
  (pipeline.finally ?? []).forEach((stage, i) => {
    if (seen.has(stage.id)) problems.push({ path: ['finally', i, 'id'], message: `duplicate stage id "${stage.id}"; finally stages need ids of their own` });
    seen.add(stage.id);
    if (stage.needs?.length) problems.push({ path: ['finally', i, 'needs'], message: 'finally stages run one after another once the run has ended; remove `needs` (they may read any stage)' });
    if (stage.review) problems.push({ path: ['finally', i, 'review'], message: 'a finally stage cannot review: the work it would send back has ended' });
    if (stage.when !== undefined) {
      problems.push({ path: ['finally', i, 'when'], message: '`when` is not supported on finally stages; read {{run.status}} in the prompt instead' });
    }
    problems.push(...checkExpects(stage.expects, ['finally', i, 'expects']));
    problems.push(...checkOutput(stage.output, ['finally', i, 'output']));
  });
  problems.push(...checkDelivery(pipeline));
  return problems;
}

/** `workspace.push`, `pullRequest` and `isolation: stage` need what they build on. */
function checkDelivery(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const workspace = pipeline.workspace;
  if (workspace?.pullRequest && !workspace.push) {
    problems.push({ path: ['workspace', 'pullRequest'], message: 'a pull request needs the branch pushed first; add `push: { remote: origin }` to workspace' });
  }
  if (workspace?.push) {
    const clash = pipeline.stages.findIndex((s) => s.id === 'push');
    if (clash >= 0) problems.push({ path: ['stages', clash, 'id'], message: 'the stage id "push" is taken by the push of the run\'s branch (workspace.push); rename the stage' });
  }
  if (pipeline.isolation === 'stage' && !workspace?.repo) {
    problems.push({ path: ['isolation'], message: '`isolation: stage` gives each stage its own git worktree, so it needs `workspace: { repo: ... }`' });
  }
  problems.push(...checkWorkspaceKind(pipeline));
  return problems;
}

/** The git fields of `workspace` that a run in an existing folder (`workspace.dir`) cannot have. */
const GIT_ONLY_FIELDS = ['branch', 'base', 'push', 'pullRequest', 'keep'] as const;

/**
 * `workspace` is a repository (`repo`, a worktree per run) or an existing folder (`dir`), never both. The worker
 * neither branches, pushes, commits in nor removes a folder it was lent, so the git fields do not apply to `dir`.
 */
function checkWorkspaceKind(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const workspace = pipeline.workspace;
  if (!workspace) return [];
  if (workspace.repo === undefined && workspace.dir === undefined) {
    return [{ path: ['workspace'], message: 'workspace needs `repo` (a git repository: each run gets its own worktree) or `dir` (an existing folder the run works in)' }];
  }
  if (workspace.repo === undefined) {
    // `dir` is given (both missing returned above).
    const problems: { path: PropertyKey[]; message: string }[] = [];
    for (const field of GIT_ONLY_FIELDS) {
      if (workspace[field] !== undefined) problems.push({ path: ['workspace', field], message: `\`${field}\` needs \`workspace.repo\`; a run in an existing folder (\`workspace.dir\`) is never branched, pushed or removed by the worker` });
    }
    [...pipeline.stages, ...(pipeline.finally ?? [])].forEach((stage, i) => {
      if (!stage.commit) return;
      const list = i < pipeline.stages.length ? 'stages' : 'finally';
      problems.push({ path: [list, list === 'stages' ? i : i - pipeline.stages.length, 'commit'], message: '`commit: true` needs `workspace.repo`; the worker does not commit in a folder it was lent (`workspace.dir`): commit there yourself after the run' });
    });
    return problems;
  }
  if (workspace.dir !== undefined) return [{ path: ['workspace', 'dir'], message: 'give either `repo` or `dir`, not both: `repo` gives each run a worktree of its own, `dir` runs in an existing folder' }];
  if (workspace.shared !== undefined) return [{ path: ['workspace', 'shared'], message: '`shared` needs `workspace.dir`: it lets runs share an existing folder, while each run of a repository (`repo`) has a worktree of its own' }];
  return [];
}

/** The API answer's `output:` path must stay inside the workspace (checked again once its template is filled). */
function checkOutput(output: string | undefined, path: PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  if (output === undefined || !leavesFolder(output)) return [];
  return [{ path, message: `"${output}" leaves the run's workspace; the answer is written relative to it, e.g. "outputs/{{stage.id}}.md"` }];
}

/** `expects` entries must stay inside the workspace. */
function checkExpects(expects: readonly string[] | undefined, path: PropertyKey[]): { path: PropertyKey[]; message: string }[] {
  return (expects ?? []).flatMap((pattern, j) =>
    leavesFolder(pattern)
      ? [{ path: [...path, j], message: `"${pattern}" is outside the run's workspace; use a workspace-relative path or glob such as docs/*.md` }]
      : [],
  );
}

function checkCondition(pipeline: PipelineDefinition, when: string, stageId: string, ancestors: Set<string>): string[] {
  let node: ConditionNode;
  try {
    node = parseCondition(when);
  } catch (err) {
    if (err instanceof ConditionSyntaxError) return [`invalid condition: ${err.message}`];
    throw err;
  }
  const problems: string[] = [];
  const references = listConditionReferences(node);
  const unique = (kind: string): string[] => [...new Set(references.filter((p) => p[0] === kind).map((p) => p[1]))];
  for (const id of unique('stages')) {
    if (!ancestors.has(id)) {
      problems.push(`the condition reads stage "${id}", which stage "${stageId}" does not run after; add "${id}" to its needs`);
    }
  }
  const declared = Object.keys(pipeline.inputs ?? {});
  for (const name of unique('inputs')) {
    if (!declared.includes(name)) problems.push(`the condition reads {{inputs.${name}}}, which the pipeline does not declare; declared inputs: ${declared.join(', ') || '(none)'}`);
  }
  return problems;
}

/**
 * Agent, step and system prompt files and `promptsDir` that leave the pipeline file's folder (`../`, absolute, `~`):
 * a run reads only files in its pipeline's folder, so it cannot carry or read the files of the host it runs on.
 * (`context` has its own message above.)
 */
function findEscapingFiles(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const seen = new Set<string>();
  if (pipeline.promptsDir !== undefined && leavesFolder(pipeline.promptsDir)) {
    problems.push({ path: ['promptsDir'], message: `"${pipeline.promptsDir}" leaves the pipeline file's folder; a run reads only files in that folder or below it` });
  }
  for (const reference of listReferencedFiles(pipeline)) {
    if (reference.kind === 'context file' || !leavesFolder(reference.path) || seen.has(reference.field)) continue;
    // A prompt under an escaping promptsDir is reported once, at promptsDir.
    if (reference.kind === 'step file' && pipeline.promptsDir !== undefined && leavesFolder(pipeline.promptsDir)) continue;
    seen.add(reference.field);
    const path = reference.field.split(/\.|\[(\d+)\]/).filter((part) => part !== undefined && part !== '').map((part) => (/^\d+$/.test(part) ? Number(part) : part));
    problems.push({ path, message: `"${reference.path}" leaves the pipeline file's folder; a run reads only files in that folder or below it (move the ${reference.kind} there)` });
  }
  return problems;
}

/**
 * Two stages that may run at once (neither needs the other, directly or not) writing the same `output:` file would
 * overwrite each other's answer silently. An output naming `{{stage.id}}` differs per stage, so it never clashes.
 */
function findSharedOutputs(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const stages = pipeline.stages;
  stages.forEach((stage, j) => {
    const output = stage.output?.trim();
    if (!output || /\{\{\s*stage\.id\s*\}\}/.test(output)) return;
    const ancestors = findAncestors(stages, stage.id);
    const other = stages.slice(0, j).find((s) => s.output?.trim() === output && !ancestors.has(s.id) && !findAncestors(stages, s.id).has(stage.id));
    if (other) {
      problems.push({
        path: ['stages', j, 'output'],
        message: `stages "${other.id}" and "${stage.id}" may run at once and both write ${output}, so one answer would overwrite the other; give each its own output, or make one need the other`,
      });
    }
  });
  return problems;
}

/** Every `limits:` list: the pipeline's, each stage's and each `finally` stage's. */
function findAllLimitProblems(pipeline: PipelineDefinition): { path: PropertyKey[]; message: string }[] {
  const inputs = Object.keys(pipeline.inputs ?? {});
  return [
    ...findLimitProblems(pipeline.limits, inputs, ['limits']),
    ...pipeline.stages.flatMap((stage, i) => findLimitProblems(stage.limits, inputs, ['stages', i, 'limits'])),
    ...(pipeline.finally ?? []).flatMap((stage, i) => findLimitProblems(stage.limits, inputs, ['finally', i, 'limits'])),
  ];
}
