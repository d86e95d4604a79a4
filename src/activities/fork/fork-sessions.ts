import { lstat, mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { copyRegularFile } from '../../files/regular-file.js';
import type { RunRef } from '../../pipeline/run-state.js';
import type { ObjectStore } from '../../store/object-store.js';
import { newestRunCheckpoint, unpackBookkeeping } from '../checkpoint/read-checkpoint.js';
import { withScratch } from '../checkpoint/scratch.js';
import { runPaths } from '../workspace/run-folder.js';
import type { RunWorkspace } from '../workspace/run-workspace.js';

/** A session id as the CLI makes them: a UUID, so it never names a path. */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Who reads the source's stored bookkeeping, in failure messages. */
const FORK_STAGE = '(fork)';

/**
 * Copies the sessions of the stages a fork takes over from the source run's Claude Code config into the fork's, keyed
 * by the fork's folder (the CLI keeps `<config>/projects/<cwd with / as ->/<id>.jsonl`), so a rework of such a stage
 * resumes its own conversation in the fork. Only regular files are copied. A session this host does not hold (the
 * source ran on another host, whose disk may be gone) is read from the source's newest checkpoint in `store`, which
 * carries the run's bookkeeping when checkpoints are `on`; one found nowhere is left out, with a warning (the stage's
 * rework then starts a new session).
 */
export async function copyForkSessions(
  workspacesRoot: string,
  source: RunRef,
  workspace: RunWorkspace,
  sessions: [stage: string, sessionId: string][],
  store?: ObjectStore,
): Promise<{ copied: [string, string][]; warnings: string[] }> {
  const wanted = sessions.filter(([, sessionId]) => SESSION_ID.test(sessionId));
  const local = await copyFrom(runPaths(workspacesRoot, source).bookkeeping, workspace, wanted);
  let { copied, missing } = local;
  if (missing.length > 0 && store) {
    const manifest = await newestRunCheckpoint(store, source);
    if (manifest) {
      const stored = await withScratch(workspacesRoot, async (scratch) => {
        const bookkeeping = path.join(scratch, 'bookkeeping');
        await unpackBookkeeping({ store }, { runId: source.runId, firstExecutionRunId: source.firstExecutionRunId, stageId: FORK_STAGE }, manifest, scratch, bookkeeping);
        return copyFrom(bookkeeping, workspace, missing);
      });
      copied = [...copied, ...stored.copied];
      missing = stored.missing;
    }
  }
  const stages = missing.map(([stage]) => stage);
  const warnings = stages.length ? [`the agent sessions of ${stages.join(', ')} are not on this worker nor in the source run's checkpoints, so a rework of ${stages.length === 1 ? 'that stage' : 'those stages'} in the fork starts a new session`] : [];
  return { copied, warnings };
}

/** Copies the sessions found in the Claude Code config of the run bookkeeping `bookkeeping`; returns those not found. */
async function copyFrom(bookkeeping: string, workspace: RunWorkspace, sessions: [string, string][]): Promise<{ copied: [string, string][]; missing: [string, string][] }> {
  const projects = path.join(bookkeeping, 'claude', 'projects');
  const folders = await readdir(projects).catch(() => [] as string[]);
  const into = path.join(workspace.claudeConfigDir, 'projects', workspace.dir.replace(/[^A-Za-z0-9]/g, '-'));
  const copied: [string, string][] = [];
  const missing: [string, string][] = [];
  for (const [stage, sessionId] of sessions) {
    let found: string | undefined;
    for (const folder of folders) {
      const file = path.join(projects, folder, `${sessionId}.jsonl`);
      if ((await lstat(file).catch(() => undefined))?.isFile()) found = file;
    }
    if (!found) {
      missing.push([stage, sessionId]);
      continue;
    }
    await mkdir(into, { recursive: true });
    // Checked again on the handle: what was a regular file when looked at is copied only if it still is one.
    const to = path.join(into, `${sessionId}.jsonl`);
    await rm(to, { force: true });
    await copyRegularFile(found, to);
    copied.push([stage, sessionId]);
  }
  return { copied, missing };
}
