#!/usr/bin/env node
// Entry point of the `agent-pipeline` command.
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { addCommands } from './cli/commands/index.js';
import { addDashIdHint } from './cli/dash-id-hint.js';
import { exitCodeFor } from './cli/errors.js';
import { cliMessageOf } from './errors.js';

// A reader that stops early (`agent-pipeline list | head`) closes the pipe: that is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

const program = new Command('agent-pipeline')
  .description('Run multi-stage AI agent pipelines durably on Temporal')
  .showHelpAfterError()
  .exitOverride()
  .addHelpText(
    'after',
    '\nExit codes: 0 success, 1 the pipeline failed, 2 bad usage or invalid file, 3 cannot reach Temporal (130: Ctrl-C while watching).\n' +
      'Connection: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE.\n' +
      'Run `agent-pipeline <command> --help` for a command\'s options; docs/cli.md describes the --json output.',
  );
// Sub-commands inherit exitOverride, so a usage error anywhere reaches the catch below instead of exiting.
program.configureHelp({ sortSubcommands: false });
addCommands(program);
program.commands.forEach(function inherit(command: Command): void {
  command.exitOverride().showHelpAfterError();
  addDashIdHint(command);
  command.commands.forEach(inherit);
});

try {
  await program.parseAsync();
} catch (err) {
  process.exitCode = exitCodeFor(err);
  // Commander has printed its own message (usage errors, --help); everything else gets one line, no stack trace. An
  // InvalidArgumentError that reaches here was thrown by a command's own code, not by commander's parsing, which
  // prints its message and throws a CommanderError instead: nobody printed it yet. A library error is said with the
  // commands and flags of the command line, not the library calls a user of it never wrote.
  if (!(err instanceof CommanderError) || err instanceof InvalidArgumentError) process.stderr.write(`agent-pipeline: ${cliMessageOf(err)}\n`);
  if (process.env.AGENT_PIPELINE_DEBUG) console.error(err);
}
