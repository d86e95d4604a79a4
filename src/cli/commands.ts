import type { Command } from 'commander';
import { loadConfig, runUrl } from '../config.js';
import { connectClient } from './connect.js';
import { EXIT } from './errors.js';
import { loadPipelineFile, prepareRun } from './load-pipeline.js';
import { printJson, printLine } from './output.js';
import { describeRun, ProgressPrinter } from './progress.js';
import { followRun, queryRun, startRun } from './runs.js';

/** Collects a repeatable flag's values. */
const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `start`, `status` and `validate`: the commands that talk about runs and pipeline files. */
export function addRunCommands(program: Command, setExitCode: (code: number) => void): void {
  program
    .command('start')
    .description('start a run of a pipeline file')
    .argument('<file>', 'pipeline YAML file')
    .option('-i, --input <key=value>', 'a pipeline input (repeatable)', collect, [])
    .option('--id <id>', 'workflow id; starting the same id again reports the existing run')
    .option('--wait', 'follow the run until it ends; exit 1 if it fails')
    .option('--json', 'print machine-readable JSON')
    .action(async (file: string, opts: { input: string[]; id?: string; wait?: boolean; json?: boolean }) => {
      const config = loadConfig();
      const input = await prepareRun(file, opts.input);
      const connected = await connectClient();
      try {
        const { handle, alreadyRunning } = await startRun(connected.client, input, { taskQueue: config.taskQueue, id: opts.id });
        const link = runUrl(config, connected.namespace, handle.workflowId);
        if (!opts.json) {
          printLine(`${alreadyRunning ? 'Already running' : 'Started'}: ${handle.workflowId}`);
          if (link) printLine(`Web UI: ${link}`);
        }
        if (!opts.wait) {
          if (opts.json) printJson({ runId: handle.workflowId, alreadyRunning, webUi: link ?? null });
          return;
        }
        const state = await followRun(handle, opts.json ? () => {} : printLine);
        if (opts.json) printJson(state);
        else describeRun(state, link).forEach((line) => printLine(line));
        setExitCode(state.status === 'completed' ? EXIT.OK : EXIT.PIPELINE_FAILED);
      } finally {
        await connected.close();
      }
    });

  program
    .command('status')
    .description('show the state of a run')
    .argument('<id>', 'run (workflow) id')
    .option('--json', 'print machine-readable JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const config = loadConfig();
      const connected = await connectClient();
      try {
        const state = await queryRun(connected.client.workflow.getHandle(id));
        if (opts.json) return printJson(state);
        new ProgressPrinter(printLine).update(state);
        describeRun(state, runUrl(config, connected.namespace, id)).forEach((line) => printLine(line));
      } finally {
        await connected.close();
      }
    });

  program
    .command('validate')
    .description('check a pipeline file without starting anything')
    .argument('<file>', 'pipeline YAML file')
    .action(async (file: string) => {
      const { pipeline } = await loadPipelineFile(file);
      printLine(`${file}: pipeline "${pipeline.name}" is valid (${pipeline.stages.length} stages)`);
    });
}
