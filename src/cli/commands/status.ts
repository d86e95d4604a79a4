import type { Command } from 'commander';
import { withClient } from '../connect.js';
import { runJson } from '../json.js';
import { printJson, printLine } from '../output.js';
import { statusLines } from '../run-view.js';

export function addStatusCommand(program: Command): void {
  program
    .command('status')
    .description('show a run: stages, waits with their commands, artifacts, Web UI link')
    .argument('<id>', 'run id')
    .option('--json', 'print the run state as JSON (docs/cli.md)')
    .addHelpText(
      'after',
      '\nWorks for finished runs and with no worker running: the state then comes from the final result or the event history.\n' +
        'Exit code: 0 shown (whatever the run\'s state), 2 no such run, 3 Temporal unreachable.',
    )
    .action(async (id: string, opts: { json?: boolean }) => {
      await withClient(async ({ pipeline }) => {
        const snapshot = await pipeline.getRun(id).status();
        const webUi = pipeline.webUiUrl(id);
        if (opts.json) printJson(runJson(snapshot, webUi));
        else statusLines(snapshot, webUi, Date.now()).forEach((line) => printLine(line));
      });
    });
}
