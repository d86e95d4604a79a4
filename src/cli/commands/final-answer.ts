import type { Command } from 'commander';
import { cliMessageOf, InvalidRequestError } from '../../errors.js';
import { withClient, type ConnectedClient } from '../connect.js';
import { EXIT, UsageError } from '../errors.js';

async function printFinalAnswer(connected: ConnectedClient, runId: string, stage: string): Promise<number> {
  try {
    // The library's reader: the store of this host's own settings (AGENT_PIPELINE_STORE …), as a worker opens it.
    const text = await connected.pipeline.getRun(runId).finalAnswer(stage);
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  } catch (err) {
    // An unknown stage, no answer yet, or an answer the store here does not hold: said as the library says it (exit 2).
    if (err instanceof InvalidRequestError) throw new UsageError(cliMessageOf(err), { cause: err });
    throw err;
  }
  return EXIT.OK;
}

export function addFinalAnswerCommand(program: Command): void {
  program
    .command('final-answer')
    .description("print a stage's whole final answer (without its report block), which the run state keeps cut at 16 KB")
    .argument('<id>', 'run id')
    .requiredOption('--stage <stage>', 'the stage')
    .addHelpText(
      'after',
      "\nAn answer over 16 KB is kept whole in the workers' object store (runs/<hash of the run id>/answers/), read here from the\n" +
        'store of this host\'s settings: AGENT_PIPELINE_STORE and its AGENT_PIPELINE_STORE_* settings (and AGENT_PIPELINE_ENCRYPTION_KEY\n' +
        "when the workers encrypt), as the workers have them. Without AGENT_PIPELINE_STORE, the default store in the workers'\n" +
        'workspaces folder (AGENT_PIPELINE_WORKSPACES), which this host must see. Shorter answers come from the run\'s state.\n' +
        'Exit code: 0 printed, 2 unknown run or stage, no answer yet, an answer the store here does not hold (pruned, or\n' +
        'another store), or a store setting to fix, 3 Temporal unreachable.',
    )
    .action(async (id: string, opts: { stage: string }) => {
      process.exitCode = await withClient((connected) => printFinalAnswer(connected, id, opts.stage));
    });
}
