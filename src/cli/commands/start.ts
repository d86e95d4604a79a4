import type { Command } from 'commander';
import { withClient } from '../connect.js';
import { checkNewIdFlag, collect, parseInputFlags } from '../options.js';
import { printJson, printLine } from '../output.js';
import { watchRun } from './watch.js';
import { agentPipelineCommand } from '../../pipeline/shell-words.js';

interface StartOptions {
  input?: string[];
  id?: string;
  wait?: boolean;
  json?: boolean;
  filesFromWorker?: boolean;
}

/**
 * What `start` and `schedule create|update` bundle and describe a run's files with: loaded when such a command runs,
 * as every command's own modules are, so `--help` and the other commands start without the parser, the schemas and
 * the bundler (docs/performance.md, "Command start-up").
 */
export async function runInputModules() {
  const [{ prepareRunInput }, { describeFiles }, { summarizeBundle }] = await Promise.all([
    import('../../library/pipeline-source.js'),
    import('../../library/runs.js'),
    import('../../bundle/create-run-bundle.js'),
  ]);
  return { prepareRunInput, describeFiles, summarizeBundle };
}

export function addStartCommand(program: Command): void {
  program
    .command('start')
    .description('start a run of a pipeline file')
    .argument('<file>', 'pipeline YAML file; it and every file it names are carried in the run (docs/cli.md, "Runs carry their files")')
    .option('-i, --input <key=value>', 'a pipeline input (repeatable); key=@FILE reads the value from a file, key=@- from standard input, key=@@text is the literal @text', collect)
    .option('--id <id>', 'run (workflow) id; starting an id that is still running reports that run instead')
    .option('--wait', 'follow the run live until it ends; exit 1 if it fails')
    .option('--json', 'print JSON: {runId, alreadyRunning, webUi, bundle}, or with --wait the final run state (docs/cli.md)')
    .option('--files-from-worker', 'do not carry the files in the run: workers read them from the same path on their own host')
    .addHelpText(
      'after',
      '\nExamples:\n  agent-pipeline start examples/demo/pipeline.yaml --input feature="dark mode" --wait\n  agent-pipeline start pipeline.yaml --id nightly-2024-06-01 --json\n  git diff | agent-pipeline start review.yaml --input diff=@- --input brief=@brief.md\n' +
        '\nExit code: 0 started (or completed with --wait), 1 the run failed, 2 invalid file or inputs, 3 Temporal unreachable.',
    )
    .action(async (file: string, opts: StartOptions) => {
      // Checked before connecting: an invalid file or id exits 2 whether or not Temporal is up.
      checkNewIdFlag(opts.id);
      const inputs = parseInputFlags(opts.input ?? []);
      const { prepareRunInput, describeFiles, summarizeBundle } = await runInputModules();
      const input = await prepareRunInput(file, { inputs, describeInputFile: (name, path) => `--input ${name}=@${path}`, filesFromWorker: opts.filesFromWorker });
      process.exitCode = await withClient(async (connected) => {
        const run = await connected.pipeline.startPrepared(input, { id: opts.id });
        const { id: runId, alreadyRunning } = run;
        const webUi = connected.pipeline.webUiUrl(runId);
        if (opts.json && !opts.wait) {
          printJson({ runId, alreadyRunning, webUi: webUi ?? null, bundle: input.bundle ? summarizeBundle(input.bundle) : null });
          return 0;
        }
        if (!opts.json) {
          printLine(`${alreadyRunning ? 'Already running' : 'Started'}: ${runId}`);
          if (!alreadyRunning) printLine(describeFiles(input));
          if (!opts.wait) {
            printLine(`Follow it:  ${agentPipelineCommand('watch', runId)}`);
            if (webUi) printLine(`Web UI:     ${webUi}`);
            return 0;
          }
        }
        return watchRun(connected, runId, { json: opts.json });
      });
    });
}
