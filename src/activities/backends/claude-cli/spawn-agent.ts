import { existsSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';

/**
 * util-linux's setpriv lets the kernel act on the agent the moment the worker dies without cleaning up: it freezes it
 * (SIGSTOP). Frozen, the CLI can neither go on alone (read its closed input, ask the model again) nor stop its own
 * tools: on SIGTERM the CLI SIGKILLs its Bash tools about a second after its own SIGTERM to them, and a tool still in
 * its EXIT trap on a loaded machine lost its lock release to that. The worker's watchdog then stops everything the
 * way every stop here goes (`process/stop.ts`): the tools first, within the operator's grace, then the CLI, with a
 * SIGCONT after each SIGTERM so the frozen CLI can act on it.
 */
const SETPRIV = '/usr/bin/setpriv';
/** The parent-death signal of an agent (see above). */
const ON_WORKER_DEATH = 'STOP';

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
  const [file, args] = existsSync(SETPRIV) ? [SETPRIV, ['--pdeathsig', ON_WORKER_DEATH, '--', launch.binary, ...launch.args]] : [launch.binary, launch.args];
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
