#!/usr/bin/env node
/**
 * Runs the scripted model server from the command line:
 * `node dist/dev/model-server-main.js --scenario FILE [--port N] [--host H] [--concurrent-requests-per-key N]`.
 * Prints `model server listening on <url>` on stdout and runs until SIGTERM or SIGINT.
 */
import { parseArgs } from 'node:util';
import { startModelServer } from './model-server.js';
import { ScenarioValidationError } from './scenario.js';

const USAGE = 'usage: model-server --scenario FILE [--port N] [--host 127.0.0.1] [--concurrent-requests-per-key N (429 with retry-after beyond)]';

async function main(): Promise<number> {
  let values: { scenario?: string; port?: string; host?: string; 'concurrent-requests-per-key'?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: {
        scenario: { type: 'string', short: 's' },
        port: { type: 'string', short: 'p' },
        host: { type: 'string' },
        'concurrent-requests-per-key': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!values.scenario) {
    process.stderr.write(`missing --scenario FILE\n${USAGE}\n`);
    return 2;
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write(`invalid --port ${JSON.stringify(values.port)}: expected an integer from 0 to 65535\n`);
    return 2;
  }
  const perKey = values['concurrent-requests-per-key'];
  const concurrentRequestsPerKey = perKey === undefined ? undefined : Number(perKey);
  if (concurrentRequestsPerKey !== undefined && (!Number.isInteger(concurrentRequestsPerKey) || concurrentRequestsPerKey < 1)) {
    process.stderr.write(`invalid --concurrent-requests-per-key ${JSON.stringify(perKey)}: expected a whole number of 1 or more\n`);
    return 2;
  }
  let server;
  try {
    server = await startModelServer({ scenario: values.scenario, port, host: values.host, concurrentRequestsPerKey });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return error instanceof ScenarioValidationError ? 2 : 1;
  }
  process.stdout.write(`model server listening on ${server.url}\n`);
  const running = server;
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve();
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  await running.close();
  return 0;
}

process.exitCode = await main();
