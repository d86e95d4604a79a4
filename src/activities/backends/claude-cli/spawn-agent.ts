import { existsSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';

/**
 * util-linux's setpriv lets the kernel stop the agent when the worker dies without cleaning up. TERM, not KILL, so
 * that the CLI can end its tools; the worker's watchdog SIGKILLs whatever is left after the grace.
 */
const SETPRIV = '/usr/bin/setpriv';

/** How an agent process is started; a warm start compares all of it. */
export interface AgentLaunch {
  binary: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

/**
 * Starts `claude` the one way every agent starts: in a process group of its own, so that a stop reaches the CLI and
 * the tools it started in that group together; with only the environment given; under setpriv where there is one.
 * With `input` the prompt is written to stdin, which is then closed; without, stdin stays open for the prompt to come
 * (a warm start).
 */
export function spawnAgent(launch: AgentLaunch, input?: string): ResultPromise {
  const [file, args] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', 'TERM', '--', launch.binary, ...launch.args]] : [launch.binary, launch.args];
  return execa(file, args, {
    cwd: launch.cwd,
    env: launch.env,
    extendEnv: false,
    detached: true,
    buffer: false,
    reject: false,
    ...(input === undefined ? { stdin: 'pipe' as const } : { input }),
  });
}
