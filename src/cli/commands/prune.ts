import type { Command } from 'commander';
import { parseAgeMs } from '../options.js';
import { printJson, printLine, printNote } from '../output.js';

const DEFAULT_AGE = '7d';

export function addPruneCommand(program: Command): void {
  program
    .command('prune')
    .description('remove the workspaces (git worktrees and run folders) of runs that ended long enough ago')
    // Parsed by commander, so a bad value is reported with the flag's name (parsed in the action, it exited 2 silently).
    .option('--older-than <duration>', `only runs that ended at least this long ago (e.g. 12h, 7d; 0s: every run that ended) (default: ${DEFAULT_AGE})`, parseAgeMs)
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('--json', 'print [{"runId", "firstExecutionRunId", "earlier", "dir", "bookkeeping", "status", "endedAt", "removed", "warnings"}]')
    .option('--force', 'do not ask Temporal: trust the record each run leaves in its bookkeeping when it ends')
    .addHelpText(
      'after',
      '\nThe workspaces folder is AGENT_PIPELINE_WORKSPACES (as the worker sees it). Temporal is asked about every run, and\n' +
        'only runs it reports closed are removed, with their bookkeeping (<workspaces>/.agent-pipeline/runs/<run folder>);\n' +
        'with --force the record a run leaves in its bookkeeping when it ends is trusted instead. What a run folder holds\n' +
        'never counts, and the workers\' own folder is never removed. The run\'s objects in the store (AGENT_PIPELINE_STORE:\n' +
        'checkpoints, whole final answers, runs/<hash of its id>/) go with it; of a run whose id a later run has (each run\n' +
        'has a folder of its own), only its own checkpoints. Running runs are never touched. A worktree is removed with\n' +
        '`git worktree remove`; its branch stays when it was pushed, and is deleted with `git branch -d` otherwise (which\n' +
        'keeps a branch with commits merged nowhere else).\n' +
        'Exit code: 0 done, 2 bad usage, 3 Temporal unreachable (nothing is removed; --force to trust the records).',
    )
    .action(async (opts: { olderThan?: number; dryRun?: boolean; json?: boolean; force?: boolean }) => {
      const maxAgeMs = opts.olderThan ?? parseAgeMs(DEFAULT_AGE);
      // Loaded here, as every command's own modules are (docs/performance.md, "Command start-up").
      const [{ loadConfig }, { pruneWorkspaces }] = await Promise.all([import('../../config.js'), import('../prune-workspaces.js')]);
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
