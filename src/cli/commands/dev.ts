import type { Command } from 'commander';
import { parsePort } from '../options.js';
import { printNote } from '../output.js';
import { describeAgentCredentials } from '../agent-credentials-notice.js';

export function addDevCommand(program: Command): void {
  program
    .command('dev')
    .description('run the embedded Temporal dev server, plus a worker')
    .option('--port <port>', 'Temporal gRPC port; the Web UI uses port + 1000', parsePort, 7233)
    .option('--no-worker', 'start only the server')
    .option('--scenario <file>', 'answer agents from this scripted model scenario when no ANTHROPIC_API_KEY is set')
    .addHelpText('after', '\nIn another terminal: TEMPORAL_ADDRESS=127.0.0.1:PORT agent-pipeline start FILE --wait. Ctrl-C stops everything.')
    .action(async (opts: { port: number; worker: boolean; scenario?: string }) => {
      // First, so that it is read before the server's lines, and also when the server cannot start.
      const credentials = opts.worker ? describeAgentCredentials(process.env, opts.scenario) : undefined;
      if (credentials) printNote(credentials);
      const { startLocalStack } = await import('../local-stack.js');
      const stack = await startLocalStack({ port: opts.port, worker: opts.worker, scenarioFile: opts.scenario, log: printNote });
      printNote(`Ready. Point clients at TEMPORAL_ADDRESS=${stack.server.address}. Ctrl-C stops.`);
      if (stack.worker) await stack.workerDone;
      else await new Promise<void>((resolve) => ['SIGINT', 'SIGTERM'].forEach((s) => process.once(s, () => resolve())));
      await stack.stop();
    });
}
