import { randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { shellQuote } from '../../../pipeline/shell-words.js';

/*
 * How a sandboxed command gets its environment without handing it to the programs that build the sandbox. `setpriv`,
 * the sandbox runtime's `srt` (a node process), the shell it starts bubblewrap with and bubblewrap itself all run
 * outside the sandbox as the worker's user, and each reads its environment: `NODE_OPTIONS` makes `srt` run code of the
 * pipeline's choosing, `PATH` picks the `bwrap` and `socat` it runs, `LD_PRELOAD` loads a library into all of them. A
 * stage's `env:` (whoever starts the run writes it) must therefore reach the command only once it is inside: those
 * programs get the worker's own base variables, and the command's environment is written to a file (mode 0600, in
 * the run's home, which the sandbox lets the command read) that a shell inside the sandbox reads, removes, applies and
 * then execs the command with. A value is never on a command line, where `ps` would show a `passEnv` secret to the host.
 */

/** A name a POSIX shell can export; `env:` and `passEnv:` names are checked against the same rule (command-stage.ts). */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Runs inside the sandbox: reads the file and removes it while `PATH` is still the worker's (the stage's own `PATH`
 * may not find `cat` or `rm`), then applies it and becomes the command. The text is kept as a positional parameter,
 * not a variable, so that no name in `env:` can clash with it. Exit 125 when the file cannot be read.
 */
const LOADER = 'set -- "$(cat -- "$1")" "$@"; [ -n "$1" ] || exit 125; rm -f -- "$2"; eval "$1" || exit 125; shift 2; exec "$@"';

/** The file's text: one `export NAME='value'` line a variable, in order (the markers, last, win). */
export function environmentScript(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => {
      if (!SHELL_NAME.test(name)) throw new Error(`the command's environment holds ${JSON.stringify(name)}, which is no variable name a shell can export`);
      return `export ${name}=${shellQuote(value)}\n`;
    })
    .join('');
}

/** A command started in the sandbox with its environment from a file. */
export interface EnvFileLaunch {
  /** The argv to place after the sandbox's prefix. */
  argv: string[];
  /** Removes the file if the command never got to it. */
  cleanup(): Promise<void>;
}

/** Writes `env` to a new file in `dir` (the run's home) and returns the argv that loads it and then runs `argv`. */
export async function launchWithEnvFile(dir: string, env: Record<string, string>, argv: string[]): Promise<EnvFileLaunch> {
  const file = path.join(dir, `.agent-pipeline-env-${randomUUID()}`);
  await writeFile(file, environmentScript(env), { mode: 0o600, flag: 'wx' });
  return {
    argv: ['/bin/sh', '-c', LOADER, 'agent-pipeline-command', file, ...argv],
    cleanup: () => rm(file, { force: true }),
  };
}
