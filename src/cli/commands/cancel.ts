import type { Command } from 'commander';
import { withClient } from '../connect.js';
import { printJson, printLine } from '../output.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

export function addCancelCommand(program: Command): void {
  program
    .command('cancel')
    .description('cancel a run; running agents stop, their work stays in the workspace')
    .argument('<id>', 'run id')
    .option('--json', 'print {"runId", "cancelRequested": true, "workerPolling"}')
    .addHelpText('after', '\nExit code: 0 cancellation requested, 2 unknown or already finished run, 3 Temporal unreachable.')
    .action(async (id: string, opts: { json?: boolean }) => {
      await withClient(async ({ pipeline }) => {
        const { workerPolling, taskQueue } = await pipeline.getRun(id).cancel();
        if (opts.json) return printJson({ runId: id, cancelRequested: true, workerPolling });
        if (workerPolling) printLine(`Cancellation requested for ${id}; running stages are being stopped.`);
        else printLine(`Cancellation recorded for ${id}; no worker polls task queue "${taskQueue}", so the run stops when one starts (agent-pipeline worker).`);
        printLine(`Follow it: ${agentPipelineCommand('watch', id)}`);
      });
    });
}
