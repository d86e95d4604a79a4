import type { Command } from 'commander';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { readEndedMarker, removeRunWorkspace } from '../../activities/workspace/remove-workspace.js';
import { loadConfig } from '../../config.js';
import { withClient } from '../connect.js';
import { parseDurationMs } from '../options.js';
import { printJson, printLine, printNote } from '../output.js';

/** What `prune` decided about one run folder. */
interface PruneEntry {
  runId: string;
  dir: string;
  /** How the run ended, or `running` / `unknown` (no such run in Temporal). */
  status: string;
  /** @format ISO 8601 */
  endedAt?: string;
  removed: boolean;
  warnings: string[];
}

const DEFAULT_AGE = '7d';

export function addPruneCommand(program: Command): void {
  program
    .command('prune')
    .description('remove the workspaces (git worktrees and run folders) of runs that ended long enough ago')
    .option('--older-than <duration>', 'only runs that ended at least this long ago (e.g. 12h, 7d)', DEFAULT_AGE)
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'print [{"runId", "dir", "status", "endedAt", "removed", "warnings"}]')
    .addHelpText(
      'after',
      '\nThe workspaces folder is AGENT_PIPELINE_WORKSPACES (as the worker sees it). A run records when it ended in its folder;\n' +
        'for folders without that record Temporal is asked. Running runs are never touched. A worktree is removed with\n' +
        '`git worktree remove`; its branch stays when it was pushed, and is deleted with `git branch -d` otherwise\n' +
        '(which keeps a branch with commits merged nowhere else).\n' +
        'Exit code: 0 done, 2 bad usage, 3 Temporal unreachable (only asked for folders without a record).',
    )
    .action(async (opts: { olderThan: string; dryRun?: boolean; json?: boolean }) => {
      const maxAgeMs = parseDurationMs(opts.olderThan);
      const root = loadConfig().workspacesRoot;
      const entries = await pruneWorkspaces(root, Date.now() - maxAgeMs, opts.dryRun ?? false);
      if (opts.json) return printJson(entries);
      if (entries.length === 0) return printLine(`No run workspaces in ${root}.`);
      for (const entry of entries) {
        const ended = entry.endedAt ? `, ended ${entry.endedAt}` : '';
        printLine(`${entry.removed ? (opts.dryRun ? 'would remove' : 'removed') : 'kept'}  ${entry.runId} (${entry.status}${ended})`);
        for (const warning of entry.warnings) printNote(`  ${warning}`);
      }
    });
}

/** Removes the workspaces under `root` of runs that ended before `cutoffMs`. */
async function pruneWorkspaces(root: string, cutoffMs: number, dryRun: boolean): Promise<PruneEntry[]> {
  const folders = (await readdir(root, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const entries: PruneEntry[] = [];
  const unrecorded: PruneEntry[] = [];
  for (const name of folders) {
    const dir = path.join(root, name);
    const marker = await readEndedMarker(dir);
    const entry: PruneEntry = { runId: marker?.runId ?? name, dir, status: marker?.status ?? 'unknown', removed: false, warnings: [] };
    if (marker) entry.endedAt = new Date(marker.endedAt).toISOString();
    else unrecorded.push(entry);
    entries.push(entry);
  }
  if (unrecorded.length > 0) {
    await withClient(async ({ client }) => {
      for (const entry of unrecorded) {
        try {
          const described = await client.workflow.getHandle(entry.runId).describe();
          entry.status = described.status.name.toLowerCase();
          if (described.closeTime) entry.endedAt = described.closeTime.toISOString();
        } catch {
          entry.warnings.push('no run with this id is known to Temporal; the folder is kept (remove it by hand if it is not wanted)');
        }
      }
    });
  }
  for (const entry of entries) {
    if (entry.status === 'running' || !entry.endedAt || Date.parse(entry.endedAt) > cutoffMs) continue;
    entry.removed = true;
    if (!dryRun) entry.warnings.push(...(await removeRunWorkspace(entry.dir, (await readEndedMarker(entry.dir))?.pushed)));
  }
  return entries;
}
