import type { Command } from 'commander';
import { InvalidRequestError } from '../../library/errors.js';
import { finalAnswerOf } from '../../library/final-answer.js';
import { readRun } from '../../library/run-reader.js';
import { withClient, type ConnectedClient } from '../connect.js';
import { EXIT, UsageError } from '../errors.js';

async function printFinalAnswer(connected: ConnectedClient, runId: string, stage: string): Promise<number> {
  try {
    const text = await finalAnswerOf((await readRun(connected.client, runId)).state, stage);
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  } catch (err) {
    // An unknown stage, no answer yet, or an answer this host cannot read: said as the library says it (exit 2).
    if (err instanceof InvalidRequestError) throw new UsageError(err.message);
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
      "\nAn answer over 16 KB is kept whole in the run's bookkeeping on the worker (<workspaces>/.agent-pipeline/runs/<run folder>/stages/<stage>/…/attempt-N.answer.md),\n" +
        "so run this on a machine that sees the workers' workspaces folder (AGENT_PIPELINE_WORKSPACES). Shorter answers come from the run's state, from anywhere.\n" +
        'Exit code: 0 printed, 2 unknown run or stage, no answer yet, or an answer this host cannot read, 3 Temporal unreachable.',
    )
    .action(async (id: string, opts: { stage: string }) => {
      process.exitCode = await withClient((connected) => printFinalAnswer(connected, id, opts.stage));
    });
}
