import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { withClient } from '../connect.js';
import { parsePort } from '../options.js';
import { printLine, printNote } from '../output.js';
import { watchRun } from './watch.js';

const DEMO_DIR = fileURLToPath(new URL('../../../examples/demo/', import.meta.url));

export function addDemoCommand(program: Command): void {
  program
    .command('demo')
    .description('run the demo pipeline end to end on a local server (`npm start`)')
    .option('--port <port>', 'Temporal gRPC port; the Web UI uses port + 1000', parsePort, 7233)
    .option('--exit', 'stop when the run ends instead of keeping the Web UI up (the default when stdin is not a terminal)')
    .action(async (opts: { port: number; exit?: boolean }) => {
      const { startLocalStack } = await import('../local-stack.js');
      const stack = await startLocalStack({ port: opts.port, scenarioFile: `${DEMO_DIR}scenario.yaml`, log: printNote });
      // Everything after this talks to the embedded server, and links to the Web UI where it listens (printed above).
      process.env.TEMPORAL_ADDRESS = stack.server.address;
      process.env.AGENT_PIPELINE_WEB_UI = stack.server.uiUrl ?? '';
      try {
        process.exitCode = await withClient(async (connected) => {
          const run = await connected.pipeline.start(`${DEMO_DIR}pipeline.yaml`);
          printLine(`Started demo run ${run.id}`);
          return watchRun(connected, run.id, {});
        }, stack.server.address);
        if (!opts.exit && process.stdin.isTTY) {
          printLine(`The Web UI stays up at ${stack.server.uiUrl}. Press Ctrl-C to stop.`);
          await stack.workerDone;
        }
      } finally {
        await stack.stop();
      }
    });
}
