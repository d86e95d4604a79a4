#!/usr/bin/env node
// Entry point of the `agent-pipeline` command.
import { Command, CommanderError } from 'commander';
import { PipelineValidationError } from './pipeline/errors.js';
import { addLocalCommands } from './cli/local-commands.js';
import { addRunCommands } from './cli/commands.js';
import { EXIT, TemporalUnreachableError, UsageError } from './cli/errors.js';
import { DevServerError } from './dev/dev-server.js';

const setExitCode = (code: number): void => {
  process.exitCode = code;
};

const program = new Command('agent-pipeline')
  .description('Run multi-stage AI agent pipelines durably on Temporal')
  .showHelpAfterError()
  .exitOverride();
addRunCommands(program, setExitCode);
addLocalCommands(program, setExitCode);

try {
  await program.parseAsync();
} catch (err) {
  process.exitCode = exitCodeFor(err);
  if (!(err instanceof CommanderError)) process.stderr.write(`agent-pipeline: ${(err as Error).message}\n`);
  if (process.exitCode === EXIT.PIPELINE_FAILED && process.env.AGENT_PIPELINE_DEBUG) console.error(err);
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
  if (err instanceof UsageError || err instanceof PipelineValidationError) return EXIT.USAGE;
  if (err instanceof TemporalUnreachableError) return EXIT.TEMPORAL_UNREACHABLE;
  if (err instanceof DevServerError) return EXIT.USAGE;
  return EXIT.PIPELINE_FAILED;
}
