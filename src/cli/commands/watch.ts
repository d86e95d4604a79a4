import type { Command } from 'commander';
import { withClient, type ConnectedClient } from '../connect.js';
import { EXIT } from '../errors.js';
import { runJson } from '../json.js';
import { LiveView } from '../live-view.js';
import { printJson, printLine, printNote } from '../output.js';
import { closingLines } from '../run-view.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

export interface WatchOptions {
  json?: boolean;
}

/**
 * Shows a run's progress live until it ends or the person presses Ctrl-C (which stops watching, not the run), then
 * prints the outcome. Returns the exit code: 0 completed, 1 failed or cancelled, 130 interrupted.
 */
export async function watchRun(connected: ConnectedClient, runId: string, options: WatchOptions): Promise<number> {
  const webUi = connected.pipeline.webUiUrl(runId);
  // With --json, stdout carries only the final document; progress goes to stderr when a person is looking.
  const view = options.json ? (process.stderr.isTTY ? new LiveView(process.stderr) : undefined) : new LiveView(process.stdout);
  const { interruptSignal } = await import('../../library/follow-run.js');
  const interrupt = interruptSignal();
  try {
    const { snapshot, interrupted } = await connected.pipeline.getRun(runId).follow({
      signal: interrupt.signal,
      onSnapshot: (s) => view?.render(s),
      onRetry: (reason) => printNote(`! no answer from Temporal (${reason}); still watching`),
    });
    if (interrupted) {
      printNote(`Stopped watching; the run goes on. Watch again with: ${agentPipelineCommand('watch', runId)}`);
      return EXIT.INTERRUPTED;
    }
    if (options.json) printJson(runJson(snapshot, webUi));
    else closingLines(snapshot.state, webUi).forEach((line) => printLine(line));
    return snapshot.state.status === 'completed' ? EXIT.OK : EXIT.PIPELINE_FAILED;
  } finally {
    interrupt.dispose();
  }
}

export function addWatchCommand(program: Command): void {
  program
    .command('watch')
    .description('follow a run live until it ends; Ctrl-C stops watching, not the run')
    .argument('<id>', 'run id (the workflow id `start` printed)')
    .option('--json', 'print the final state as JSON (see docs/cli.md)')
    .addHelpText('after', '\nOn a terminal the stage table is redrawn in place; piped, each change is one line.\nExit code: 0 completed, 1 failed or cancelled, 2 unknown run, 3 Temporal unreachable, 130 Ctrl-C.')
    .action(async (id: string, opts: WatchOptions) => {
      process.exitCode = await withClient((connected) => watchRun(connected, id, opts));
    });
}
