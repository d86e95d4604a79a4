/*
 * Commands printed for a person to copy and paste (`Follow it: agent-pipeline watch RUN`, the commands that move a
 * waiting stage on, `git merge BRANCH` after a conflict): every value a run, a schedule or a person brought into one
 * (a run or schedule id, a branch, a folder, a tool name) goes in as one shell word, so that pasting the line runs
 * that command and nothing else. Pure: the workflow builds such lines too.
 */

/** Characters no POSIX shell (nor zsh, bash or fish) gives a meaning inside a word; `=` is left out of a word's start, which zsh expands. */
const PLAIN_WORD = /^[\w./:@%+,-][\w./:=@%+,-]*$/;

/** `value` as one single-quoted word of a POSIX shell: nothing in it is expanded. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}

/** `value` as one shell word: as it is when no character in it means anything to a shell, else single-quoted. */
export function shellWord(value: string): string {
  return PLAIN_WORD.test(value) ? value : shellQuote(value);
}

/**
 * An `agent-pipeline` command that names a run or a schedule by its id, as a line to paste: `agent-pipeline COMMAND ID
 * OPTIONS… OPERANDS…`, the id as one shell word. An id that starts with "-" (a run started before such ids were
 * refused) would be read as an option, quoted or not: it then goes after `--`, which ends the options, so the options
 * come before it (`agent-pipeline approve --stage review -- -x`).
 * @param options the command's options, each already written as shell words (`--stage ${shellWord(stage)}`)
 * @param operands what follows the id (`"..."`), already shell words
 */
export function agentPipelineCommand(command: string, id: string, options: readonly string[] = [], operands: readonly string[] = []): string {
  const words = id.startsWith('-') ? [command, ...options, '--', shellWord(id), ...operands] : [command, shellWord(id), ...options, ...operands];
  return `agent-pipeline ${words.join(' ')}`;
}
