import { copyFile, lstat, mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { runPaths } from '../workspace/run-folder.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';

/** A session id as the CLI makes them: a UUID, so it never names a path. */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Copies the sessions of the stages a fork takes over from the source run's Claude Code config into the fork's, keyed
 * by the fork's folder (the CLI keeps `<config>/projects/<cwd with / as ->/<id>.jsonl`), so a rework of such a stage
 * resumes its own conversation in the fork. Only regular files are copied; a session this host does not hold is left
 * out, with a warning (the stage's rework then starts a new session).
 */
export async function copyForkSessions(workspacesRoot: string, sourceRunId: string, workspace: RunWorkspace, sessions: [stage: string, sessionId: string][]): Promise<{ copied: [string, string][]; warnings: string[] }> {
  const projects = path.join(runPaths(workspacesRoot, sourceRunId).bookkeeping, 'claude', 'projects');
  const folders = await readdir(projects).catch(() => [] as string[]);
  const into = path.join(workspace.claudeConfigDir, 'projects', workspace.dir.replace(/[^A-Za-z0-9]/g, '-'));
  const copied: [string, string][] = [];
  const missing: string[] = [];
  for (const [stage, sessionId] of sessions) {
    if (!SESSION_ID.test(sessionId)) continue;
    let found: string | undefined;
    for (const folder of folders) {
      const file = path.join(projects, folder, `${sessionId}.jsonl`);
      if ((await lstat(file).catch(() => undefined))?.isFile()) found = file;
    }
    if (!found) {
      missing.push(stage);
      continue;
    }
    await mkdir(into, { recursive: true });
    await copyFile(found, path.join(into, `${sessionId}.jsonl`));
    copied.push([stage, sessionId]);
  }
  const warnings = missing.length ? [`the agent sessions of ${missing.join(', ')} are not on this worker, so a rework of ${missing.length === 1 ? 'that stage' : 'those stages'} in the fork starts a new session`] : [];
  return { copied, warnings };
}
