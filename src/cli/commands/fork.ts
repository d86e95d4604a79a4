import type { Command } from 'commander';
import type { ForkPreview } from '../../library/fork-run.js';
import { withClient } from '../connect.js';
import { checkNewIdFlag, collect, parseInputFlags } from '../options.js';
import { printJson, printLine } from '../output.js';
import { watchRun } from './watch.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

interface ForkFlags {
  from?: string;
  input?: string[];
  id?: string;
  dryRun?: boolean;
  force?: boolean;
  wait?: boolean;
  json?: boolean;
}

const EXIT_CODES = '\nExit code: 0 started (or completed with --wait, or a plan with --dry-run), 1 the run failed, 2 the fork is refused (FORK_REFUSED names the stage and field) or the file or inputs are invalid, 3 Temporal unreachable.';

/** `fork RUN --from STAGE` and `rerun RUN`: new runs that take over what a run did (docs/forking.md). */
export function addForkCommands(program: Command): void {
  withForkOptions(
    program
      .command('fork')
      .description('start a new run from a stage of an earlier run: the stages completed before it are taken over, the rest run again')
      .requiredOption('--from <stage>', 'the stage to run again, with everything after it'),
  )
    .addHelpText('after', `\nExamples:\n  agent-pipeline fork spec-20261127T101500-ab12 --from implement\n  agent-pipeline fork RUN --from review pipeline.yaml --input level=strict --dry-run\n${EXIT_CODES}`)
    .action((run: string, file: string | undefined, opts: ForkFlags) => forkAction(run, file, opts));
  withForkOptions(
    program
      .command('rerun')
      .description('start a new run that takes over every stage a run completed and runs the rest (failed, cancelled, never run); not `retry`, which decides for a live run'),
  )
    .addHelpText('after', `\nExamples:\n  agent-pipeline rerun spec-20261127T101500-ab12 --wait\n${EXIT_CODES}`)
    .action((run: string, file: string | undefined, opts: ForkFlags) => forkAction(run, file, { ...opts, from: undefined }));
}

function withForkOptions(command: Command): Command {
  return command
    .argument('<run>', 'the run to fork (its id)')
    .argument('[file]', 'the pipeline file the new run runs (default: the source run\'s file, read again with your edits)')
    .option('-i, --input <key=value>', 'an input over the source run\'s (repeatable); key=@FILE reads it from a file', collect)
    .option('--id <id>', 'the new run\'s id')
    .option('--dry-run', 'print what would be taken over, run again and refused; start nothing')
    .option('--force', 'take over stages whose definition changed (recorded on the new run as forkForced)')
    .option('--wait', 'follow the new run live until it ends; exit 1 if it fails')
    .option('--json', 'print JSON: the plan with --dry-run, {runId, forkedFrom} or with --wait the final run state');
}

async function forkAction(run: string, file: string | undefined, opts: ForkFlags): Promise<void> {
  checkNewIdFlag(opts.id);
  const inputs = parseInputFlags(opts.input ?? []);
  const options = { from: opts.from, pipeline: file, inputs, id: opts.id, force: opts.force };
  process.exitCode = await withClient(async (connected) => {
    if (opts.dryRun) return printPlan(await connected.pipeline.planFork(run, options), opts.json);
    const handle = await connected.pipeline.fork(run, options);
    const forkedFrom = await handle.forkedFrom();
    if (opts.json && !opts.wait) {
      printJson({ runId: handle.id, forkedFrom: forkedFrom ?? null });
      return 0;
    }
    if (!opts.json) {
      printLine(`Started: ${handle.id} (forked from ${run} at stage ${forkedFrom?.stage ?? opts.from})`);
      if (!opts.wait) {
        printLine(`Follow it:  ${agentPipelineCommand('watch', handle.id)}`);
        return 0;
      }
    }
    return watchRun(connected, handle.id, { json: opts.json });
  });
}

function printPlan(plan: ForkPreview, json: boolean | undefined): number {
  if (json) {
    printJson(plan);
    return plan.refused.length > 0 ? 2 : 0;
  }
  printLine(`Fork of ${plan.source} from stage ${plan.from}`);
  printLine(`Taken over: ${plan.takenOver.join(', ') || '(none)'}`);
  printLine(`Run again:  ${plan.runAgain.join(', ') || '(none)'}`);
  if (plan.refused.length === 0) return 0;
  printLine('Refused:');
  for (const r of plan.refused) printLine(`  ${r.field}: ${r.reason}`);
  printLine('Fork from an earlier stage, undo the change, or add --force (changed inputs cannot be forced).');
  return 2;
}
