import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageFailure } from '../../failures.js';
import { STAGE_MARKER, WORKER_MARKER } from '../../process/sweep.js';
import { NEVER_FOR_AGENTS } from '../claude-cli/agent-auth.js';

/*
 * A command stage's environment. A command gets none of the worker's secrets by default: only what any program needs
 * (PATH, LANG, a HOME of the run's own), the stage's `env:` (its values filled from the run), and the worker's
 * variables the stage names in `passEnv:` that the operator also lists in `AGENT_PIPELINE_COMMAND_ENV`: a pipeline
 * (whoever starts a run) asks, the operator allows.
 */

/** The worker setting listing the variables a command stage's `passEnv:` may pass on (comma-separated names). */
export const COMMAND_ENV_VARIABLE = 'AGENT_PIPELINE_COMMAND_ENV';

/** What any program expects, taken from the worker's environment as they are: none holds a secret. */
const BASE_VARIABLES = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'USER', 'LOGNAME', 'TMPDIR'] as const;

/** The base variables the worker has. */
function baseVariables(workerEnv: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(BASE_VARIABLES.filter((name) => workerEnv[name] !== undefined).map((name) => [name, workerEnv[name] as string]));
}

/** The names `AGENT_PIPELINE_COMMAND_ENV` allows, read once when the worker starts; never a signing or encryption key. */
export function allowedCommandEnv(env: NodeJS.ProcessEnv): ReadonlySet<string> {
  return new Set((env[COMMAND_ENV_VARIABLE] ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '' && !NEVER_FOR_AGENTS.includes(name)));
}

/** The values a command may be given (`AGENT_PIPELINE_COMMAND_ENV`): secrets, redacted from everything reported. */
export function commandSecretValues(env: NodeJS.ProcessEnv): string[] {
  return [...allowedCommandEnv(env)].map((name) => env[name]).filter((value): value is string => !!value);
}

/** Where the command runs, for its environment. */
export interface CommandPlace {
  /** The run's own home for commands (in its bookkeeping, never the worker's). */
  home: string;
  /** The markers that let a stop, the sweep and the orphan watchdog find every process of the command. */
  markers: { stage: string; worker: string };
}

/**
 * The command's environment: the base variables (the sandbox, when on, sets its own `TMPDIR`), the run's `HOME`, the stage's rendered `env:`, the
 * allowed `passEnv:` names, then the markers (last, so that no `env:` entry can hide the command from a stop).
 * @throws CONFIG_INVALID naming the variable and the worker setting when `passEnv:` names one the worker does not allow
 */
export function commandEnvironment(stage: ResolvedStage, workerEnv: NodeJS.ProcessEnv, allowed: ReadonlySet<string>, place: CommandPlace): Record<string, string> {
  const base = baseVariables(workerEnv);
  const passed: Record<string, string> = {};
  for (const name of stage.passEnv ?? []) {
    if (!allowed.has(name)) {
      throw stageFailure({
        type: 'CONFIG_INVALID',
        stageId: stage.id,
        message: `\`passEnv\` names ${name}, which this worker does not pass to commands (${COMMAND_ENV_VARIABLE}=${[...allowed].join(',') || '(unset)'})`,
        hint: `remove ${name} from the stage's \`passEnv\`, or have the worker's operator add it to ${COMMAND_ENV_VARIABLE}`,
        details: { field: 'passEnv', variable: name },
      });
    }
    const value = workerEnv[name];
    if (value !== undefined) passed[name] = value;
  }
  return {
    ...base,
    HOME: place.home,
    ...stage.env,
    ...passed,
    [STAGE_MARKER]: place.markers.stage,
    [WORKER_MARKER]: place.markers.worker,
  };
}

/**
 * What to tell the run of `passEnv:` names the worker allows but does not have: the command runs without them, and a
 * command that needs a token would otherwise fail later with no word of why.
 */
export function unsetPassEnvWarnings(stage: ResolvedStage, workerEnv: NodeJS.ProcessEnv): string[] {
  const unset = (stage.passEnv ?? []).filter((name) => workerEnv[name] === undefined);
  if (unset.length === 0) return [];
  return [`\`passEnv\` names ${unset.join(', ')}, which this worker allows but does not have set: the command ran without ${unset.length > 1 ? 'them' : 'it'} (set ${unset.length > 1 ? 'them' : 'it'} in the worker's environment)`];
}

/**
 * The environment of what starts a sandboxed command outside the sandbox (`setpriv`, `srt`, its shell, bubblewrap):
 * the worker's base variables, the run's `HOME` and the markers, none of them the pipeline's choice. The stage's
 * `env:` and `passEnv:` reach the command inside the sandbox only (command-env-file.ts): `NODE_OPTIONS` or `PATH`
 * given to `srt` would run the pipeline's code outside the sandbox, as the worker's user.
 */
export function launcherEnvironment(workerEnv: NodeJS.ProcessEnv, place: CommandPlace): Record<string, string> {
  return { ...baseVariables(workerEnv), HOME: place.home, [STAGE_MARKER]: place.markers.stage, [WORKER_MARKER]: place.markers.worker };
}
