import type { Command } from 'commander';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { readEndedMarker, removeRunWorkspace } from '../../activities/workspace/remove-workspace.js';
import { recordedRunId } from '../../activities/workspace/run-folder.js';
import { loadConfig } from '../../config.js';
import { TemporalUnavailableError } from '../../library/errors.js';
import { withClient } from '../connect.js';
import { parseAgeMs } from '../options.js';
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
    // Parsed by commander, so a bad value is reported with the flag's name (parsed in the action, it exited 2 silently).
    .option('--older-than <duration>', `only runs that ended at least this long ago (e.g. 12h, 7d; 0s: every run that ended) (default: ${DEFAULT_AGE})`, parseAgeMs)
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'print [{"runId", "dir", "status", "endedAt", "removed", "warnings"}]')
    .option('--force', 'do not ask Temporal: trust the record each run leaves in its folder when it ends')
    .addHelpText(
      'after',
      '\nThe workspaces folder is AGENT_PIPELINE_WORKSPACES (as the worker sees it). Temporal is asked about every folder, and\n' +
        'only runs it reports closed are removed; with --force the record a run leaves in its folder when it ends is trusted\n' +
        'instead. Running runs are never touched. A worktree is removed with\n' +
        '`git worktree remove`; its branch stays when it was pushed, and is deleted with `git branch -d` otherwise\n' +
        '(which keeps a branch with commits merged nowhere else).\n' +
        'Exit code: 0 done, 2 bad usage, 3 Temporal unreachable (nothing is removed; --force to trust the records).',
    )
    .action(async (opts: { olderThan?: number; dryRun?: boolean; json?: boolean; force?: boolean }) => {
      const maxAgeMs = opts.olderThan ?? parseAgeMs(DEFAULT_AGE);
      const root = loadConfig().workspacesRoot;
      const entries = await pruneWorkspaces(root, Date.now() - maxAgeMs, { dryRun: opts.dryRun ?? false, force: opts.force ?? false });
      if (opts.json) return printJson(entries);
      if (entries.length === 0) return printLine(`No run workspaces in ${root}.`);
      for (const entry of entries) {
        const ended = entry.endedAt ? `, ended ${entry.endedAt}` : '';
        printLine(`${entry.removed ? (opts.dryRun ? 'would remove' : 'removed') : 'kept'}  ${entry.runId} (${entry.status}${ended})`);
        for (const warning of entry.warnings) printNote(`  ${warning}`);
      }
    });
}

/** Removes the workspaces under `root` of runs that ended before `cutoffMs`, as Temporal confirms (see `--force`). */
async function pruneWorkspaces(root: string, cutoffMs: number, options: { dryRun: boolean; force: boolean }): Promise<PruneEntry[]> {
  const folders = (await readdir(root, { withFileTypes: true }).catch(() => [])).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const entries: PruneEntry[] = [];
  for (const name of folders) {
    const dir = path.join(root, name);
    const marker = await readEndedMarker(dir);
    const entry: PruneEntry = { runId: marker?.runId ?? recordedRunId(dir) ?? name, dir, status: marker?.status ?? 'unknown', removed: false, warnings: [] };
    if (marker) entry.endedAt = new Date(marker.endedAt).toISOString();
    entries.push(entry);
  }
  // A record in the folder is not enough: a run id can be reused, and a run can be reset. Temporal says whether the
  // run is still going; without it (`--force`) only folders with a record of their end are removed.
  if (!options.force && entries.length > 0) {
    await withClient(async ({ client }) => confirmWithTemporal(client, entries)).catch((err: unknown) => {
      if (err instanceof TemporalUnavailableError) printNote('Nothing was removed: prune asks Temporal whether each run has ended. Use --force to trust the records runs leave in their folders.');
      throw err;
    });
  }
  for (const entry of entries) {
    if (entry.status === 'running' || !entry.endedAt || Date.parse(entry.endedAt) > cutoffMs) continue;
    const pushed = (await readEndedMarker(entry.dir))?.pushed;
    if (!options.dryRun) entry.warnings.push(...(await removeRunWorkspace(root, entry.dir, pushed)));
    entry.removed = options.dryRun || !existsSync(entry.dir);
  }
  return entries;
}

/** Sets each entry's status and end from Temporal's latest run of that id; a folder of an unknown id is kept. */
async function confirmWithTemporal(client: Client, entries: PruneEntry[]): Promise<void> {
  for (const entry of entries) {
    try {
      const described = await client.workflow.getHandle(entry.runId).describe();
      entry.status = described.status.name.toLowerCase();
      entry.endedAt = described.closeTime?.toISOString();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      entry.status = 'unknown';
      entry.endedAt = undefined;
      entry.warnings.push('no run with this id is known to Temporal; the folder is kept (remove it by hand if it is not wanted)');
    }
  }
}
