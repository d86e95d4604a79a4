import type { Command } from 'commander';
import { shellWord } from '../pipeline/shell-words.js';

/** The operands that name a run or a schedule: `status <id>`, `fork <run>`, `schedule describe <id>`. */
const ID_ARGUMENTS = new Set(['id', 'run']);

/**
 * Where `command` takes a run or schedule id, an id starting with "-" (`agent-pipeline status -x`) is read as an
 * option, and commander says only "unknown option '-x'": its error then goes on with the fix, the id after `--`
 * (which ends the options). Runs started before such ids were refused, or past our clients, have them.
 */
export function addDashIdHint(command: Command): void {
  if (!ID_ARGUMENTS.has(command.registeredArguments[0]?.name() ?? '')) return;
  const { outputError } = command.configureOutput();
  command.configureOutput({
    outputError: (text, write) => {
      if (outputError) outputError(text, write);
      else write(text);
      // Not after commander's own "(Did you mean --json?)": that flag is a typo, not an id.
      const flag = /^error: unknown option '(-[^']*)'$/.exec(text.trimEnd())?.[1];
      if (flag) write(`(if ${flag} is an id, put it after --, which ends the options: ${commandPath(command)} [options] -- ${shellWord(flag)})\n`);
    },
  });
}

/** `agent-pipeline schedule describe`: the command as typed. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let current: Command | null = command; current; current = current.parent) names.unshift(current.name());
  return names.join(' ');
}
