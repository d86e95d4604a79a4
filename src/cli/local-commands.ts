import type { Command } from 'commander';
import { fileURLToPath } from 'node:url';
import { loadConfig, runUrl } from '../config.js';
import { createPipelineWorker } from '../run-worker.js';
import { connectClient } from './connect.js';
import { EXIT, UsageError } from './errors.js';
import { prepareRun } from './load-pipeline.js';
import { printLine } from './output.js';
import { describeRun } from './progress.js';
import { followRun, startRun } from './runs.js';
import { startLocalStack } from './local-stack.js';

const DEMO_DIR = fileURLToPath(new URL('../../examples/demo/', import.meta.url));

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 64_535) throw new UsageError(`--port ${value}: expected a port number below 64535 (the Web UI uses port + 1000)`);
  return port;
}

const logLine = (line: string): void => void process.stderr.write(`${line}\n`);

/** `worker`, `dev` and `demo`: commands that run things on this machine. */
export function addLocalCommands(program: Command, setExitCode: (code: number) => void): void {
  program
    .command('worker')
    .description('run a worker against the configured Temporal server (TEMPORAL_ADDRESS, profiles)')
    .action(async () => {
      const worker = await createPipelineWorker();
      logLine(`agent-pipeline worker polling task queue "${worker.options.taskQueue}" (Ctrl-C drains and stops)`);
      await worker.run();
    });

  program
    .command('dev')
    .description('run the embedded Temporal dev server (state kept in .agent-pipeline/), plus a worker')
    .option('--port <port>', 'Temporal gRPC port; the Web UI uses port + 1000', parsePort, 7233)
    .option('--no-worker', 'start only the server')
    .option('--scenario <file>', 'answer agents from this scripted model scenario when no ANTHROPIC_API_KEY is set')
    .action(async (opts: { port: number; worker: boolean; scenario?: string }) => {
      const stack = await startLocalStack({ port: opts.port, worker: opts.worker, scenarioFile: opts.scenario, log: logLine });
      logLine(`Ready. Point clients at TEMPORAL_ADDRESS=${stack.server.address}. Ctrl-C stops.`);
      if (stack.worker) await stack.workerDone;
      else await new Promise<void>((resolve) => ['SIGINT', 'SIGTERM'].forEach((s) => process.once(s, () => resolve())));
      await stack.stop();
    });

  program
    .command('demo')
    .description('start everything locally and run the demo pipeline end to end (what `npm start` does)')
    .option('--port <port>', 'Temporal gRPC port; the Web UI uses port + 1000', parsePort, 7233)
    .option('--exit', 'stop when the run ends instead of keeping the Web UI up (the default when stdin is not a terminal)')
    .action(async (opts: { port: number; exit?: boolean }) => {
      const stack = await startLocalStack({ port: opts.port, scenarioFile: `${DEMO_DIR}scenario.yaml`, log: logLine });
      try {
        const config = loadConfig({ ...process.env, TEMPORAL_ADDRESS: stack.server.address });
        const input = await prepareRun(`${DEMO_DIR}pipeline.yaml`, []);
        const connected = await connectClient(stack.server.address);
        const { handle } = await startRun(connected.client, input, { taskQueue: config.taskQueue });
        const link = runUrl(config, connected.namespace, handle.workflowId);
        printLine(`Started demo run ${handle.workflowId}`);
        const state = await followRun(handle, printLine);
        describeRun(state, link).forEach((line) => printLine(line));
        await connected.close();
        setExitCode(state.status === 'completed' ? EXIT.OK : EXIT.PIPELINE_FAILED);
        if (!opts.exit && process.stdin.isTTY) {
          printLine(`The Web UI stays up at ${stack.server.uiUrl}. Press Ctrl-C to stop.`);
          await stack.workerDone;
        }
      } finally {
        await stack.stop();
      }
    });
}
