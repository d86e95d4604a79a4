import { Option, type Command } from 'commander';
import type { RunHandle } from '../../library/run-handle.js';
import type { RunState } from '../../pipeline/run-state.js';
import { withClient } from '../connect.js';
import { updatedRunJson } from '../json.js';
import { collectToolName, parsePositiveInt, parsePositiveNumber } from '../options.js';
import { printJson, printLine } from '../output.js';
import { runHeader, waitLines } from '../run-view.js';

/**
 * Sends a person's decision to a run through the library (which checks that the run is open and a worker polls its
 * task queue) and prints what the run does next.
 */
async function decide(id: string, json: boolean | undefined, done: string, send: (run: RunHandle) => Promise<RunState>): Promise<void> {
  await withClient(async ({ pipeline }) => {
    const state = await send(pipeline.getRun(id));
    const webUi = pipeline.webUiUrl(id);
    if (json) return printJson(updatedRunJson(state, webUi));
    printLine(`✔ ${done}`);
    printLine(runHeader(state, Date.now()));
    waitLines(state).forEach((line) => printLine(line));
  });
}

const stageHelp = 'the waiting stage; optional when only one stage waits';
const jsonHelp = 'print the run state after the decision as JSON (docs/cli.md)';
const exitHelp = '\nExit code: 0 done, 2 unknown run or the run does not wait for this, 3 Temporal or a worker unreachable.';

export function addDecisionCommands(program: Command): void {
  program
    .command('answer')
    .description("answer a stage's question; the agent continues with the answer")
    .argument('<id>', 'run id')
    .argument('<text>', 'the answer')
    .option('--stage <stage>', stageHelp)
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, text: string, opts: { stage?: string; json?: boolean }) =>
      decide(id, opts.json, `answered${opts.stage ? ` stage ${opts.stage}` : ''}`, (run) => run.answer(text, { stage: opts.stage })),
    );

  program
    .command('approve')
    .description("approve a gate, more budget, denied tools, more review rounds, or a tool call an agent waits on")
    .argument('<id>', 'run id')
    .option('--stage <stage>', stageHelp)
    .option('--budget-usd <n>', 'raise the pipeline budget to this many US dollars (budget waits)', parsePositiveNumber)
    .addOption(new Option('--allow <tool>', 'allow this tool and resume (permission waits; repeatable)').argParser(collectToolName).conflicts('allowAll'))
    .option('--allow-all', 'allow every tool the stage was denied; mid-turn: allow this tool for the rest of the stage')
    .option('--rounds <n>', 'grant this many more review rounds (review-round waits)', parsePositiveInt)
    .option('--comment <text>', 'a note kept with the decision')
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, opts: { stage?: string; budgetUsd?: number; allow?: string[]; allowAll?: boolean; rounds?: number; comment?: string; json?: boolean }) =>
      decide(id, opts.json, `approved${opts.stage ? ` stage ${opts.stage}` : ''}`, (run) =>
        run.approve({ stage: opts.stage, budgetUsd: opts.budgetUsd, allow: opts.allowAll ? 'all' : opts.allow, rounds: opts.rounds, comment: opts.comment }),
      ),
    );

  program
    .command('reject')
    .description('reject what a stage waits for; the stage fails with the reason')
    .argument('<id>', 'run id')
    .option('--stage <stage>', stageHelp)
    .requiredOption('--reason <text>', 'why; kept in the run and shown by status')
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, opts: { stage?: string; reason: string; json?: boolean }) =>
      decide(id, opts.json, `rejected${opts.stage ? ` stage ${opts.stage}` : ''}`, (run) => run.reject(opts.reason, { stage: opts.stage })),
    );

  program
    .command('deny')
    .description("deny the tool call (or question) a stage's agent waits on mid-turn; the agent goes on without it")
    .argument('<id>', 'run id')
    .option('--stage <stage>', stageHelp)
    .option('--message <text>', 'what the agent is told instead of the call\'s result, e.g. "use the test script"')
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, opts: { stage?: string; message?: string; json?: boolean }) =>
      decide(id, opts.json, `denied${opts.stage ? ` stage ${opts.stage}` : ''}`, (run) => run.deny({ stage: opts.stage, message: opts.message })),
    );

  program
    .command('retry')
    .description('run a failed stage again (`onFailure: ask`)')
    .argument('<id>', 'run id')
    .requiredOption('--stage <stage>', 'the failed stage')
    .option('--feedback <text>', 'a hint the agent gets with the retry')
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, opts: { stage: string; feedback?: string; json?: boolean }) =>
      decide(id, opts.json, `retrying stage ${opts.stage}`, (run) => run.retry({ stage: opts.stage, feedback: opts.feedback })),
    );

  program
    .command('skip')
    .description('skip a failed stage (`onFailure: ask`); its dependents still run')
    .argument('<id>', 'run id')
    .requiredOption('--stage <stage>', 'the failed stage')
    .option('--json', jsonHelp)
    .addHelpText('after', exitHelp)
    .action((id: string, opts: { stage: string; json?: boolean }) =>
      decide(id, opts.json, `skipped stage ${opts.stage}`, (run) => run.skip({ stage: opts.stage })),
    );
}
