import { stat } from 'node:fs/promises';
import type { StageInput } from '../../pipeline/stage-schema.js';
import type { TemplateStage } from '../../pipeline/template.js';
import { stageFailure } from '../failures.js';
import { resolveInside } from '../../files/inside.js';
import { resolveExistingInside, workspacePath } from '../workspace/run-workspace.js';

/** A file (or folder) a stage declared under `inputs:`, found in the workspace. */
export interface StageInputFile {
  /** Workspace-relative path with `/` separators. */
  path: string;
  /** The stage that wrote it: the declared `from`, else the earlier stage that reported it as an artifact. */
  writer?: string;
  isDirectory: boolean;
}

/**
 * Checks a stage's declared inputs before its agent starts. A missing `optional: true` input is listed in
 * `missingOptional` (the prompt notes it) instead of failing.
 * @throws INPUT_NOT_FOUND naming the path and the stage that should have written it;
 *   CONFIG_INVALID for a path that leads outside the workspace
 */
export async function resolveStageInputs(
  workspaceDir: string,
  stageId: string,
  inputs: readonly StageInput[],
  priorStages: Record<string, TemplateStage>,
): Promise<{ found: StageInputFile[]; missingOptional: string[] }> {
  const found: StageInputFile[] = [];
  const missingOptional: string[] = [];
  for (const input of inputs) {
    const { path: declared, from, optional } = typeof input === 'string' ? { path: input, from: undefined, optional: false } : input;
    const file = resolveInside(workspaceDir, declared);
    if (!file) throw outsideWorkspace(stageId, declared, workspaceDir);
    const relative = workspacePath(workspaceDir, file);
    const reporter = Object.entries(priorStages).find(([, s]) => s.artifacts.some((a) => a === relative || a.startsWith(`${relative}/`)))?.[0];
    const info = await stat(file).catch(() => undefined);
    if (!info && optional) {
      missingOptional.push(relative);
      continue;
    }
    if (!info) {
      let who: string;
      if (from) who = `stage "${from}" should have written it${Object.hasOwn(priorStages, from) ? '' : `, but "${from}" has not completed before this stage (list it under \`needs\`)`}`;
      else if (reporter) who = `stage "${reporter}" reported it as an artifact, but it is gone`;
      else who = 'no earlier stage reported it';
      throw stageFailure({
        type: 'INPUT_NOT_FOUND',
        stageId,
        message: `input ${declared} is missing from the workspace (${file}); ${who}`,
        details: { path: declared, from, reportedBy: reporter, workspace: workspaceDir },
      });
    }
    if (!(await resolveExistingInside(workspaceDir, declared))) throw outsideWorkspace(stageId, declared, workspaceDir, true);
    found.push({ path: relative, writer: from ?? reporter, isDirectory: info.isDirectory() });
  }
  return { found, missingOptional };
}

function outsideWorkspace(stageId: string, declared: string, workspaceDir: string, viaLink = false) {
  return stageFailure({
    type: 'CONFIG_INVALID',
    stageId,
    message: `input ${declared} ${viaLink ? 'is a symlink that leads' : 'is'} outside the run's workspace ${workspaceDir}; stages may only read inputs from the workspace`,
    hint: 'use a workspace-relative path such as docs/spec.md, or list shared files under the pipeline\'s `context:`',
    details: { path: declared, workspace: workspaceDir },
  });
}
