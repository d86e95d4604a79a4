import type { Command } from 'commander';
import { formatDuration } from '../../pipeline/duration.js';
import { withClient } from '../connect.js';
import { formatColumns, printJson, printLine } from '../output.js';

interface LimitsOptions {
  json?: boolean;
}

export function addLimitsCommand(program: Command): void {
  program
    .command('limits')
    .argument('[key]', 'one key, e.g. repo:acme/web')
    .description('list concurrency keys (`limits:`) with their limit, holders and waiters, first come first served')
    .option('--json', 'print {"keys": [...]} (docs/cli.md)')
    .addHelpText('after', '\nEach key is kept by its own lease workflow on the task queue (docs/limits.md); keys nobody holds or waits for are not listed.')
    .action(async (key: string | undefined, opts: LimitsOptions) => {
      await withClient(async ({ pipeline }) => {
        const keys = await pipeline.limits(key);
        if (opts.json) return printJson({ keys });
        if (keys.length === 0) return printLine(key === undefined ? 'No key is held or waited for.' : `Nobody holds or waits for key ${key}.`);
        const now = Date.now();
        for (const state of keys) {
          printLine(`${state.key} · limit ${state.limit} · ${state.holders.length} holding · ${state.waiters.length} waiting`);
          const rows = [
            ...state.holders.map((h) => ['  holds', h.label ?? h.holder, `for ${formatDuration(now - (h.grantedAt ?? h.since))}`, h.expiresAt === undefined ? 'for the run\'s life' : `renewed, expires in ${formatDuration(Math.max(0, h.expiresAt - now))}`]),
            ...state.waiters.map((w, i) => [`  ${i + 1}. waits`, w.label ?? w.holder, `for ${formatDuration(now - w.since)}`, '']),
          ];
          formatColumns(rows).forEach((line) => printLine(line));
        }
      });
    });
}
