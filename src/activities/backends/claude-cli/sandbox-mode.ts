/*
 * `AGENT_PIPELINE_SANDBOX`: how strict a worker is about Claude Code's sandbox around its agents' Bash. It is the
 * operator's choice alone: a pipeline (whoever starts a run) may narrow the sandbox (`allowedDomains`), never switch it
 * off, unless the operator chose `permissive` (docs/security.md, "Agents in a sandbox").
 */

/**
 * The worker's sandbox modes:
 * - `required`: every agent that may run Bash runs sandboxed, or its stage fails (`SANDBOX_UNAVAILABLE`); a stage's
 *   `sandbox: false` is refused. The default of a worker.
 * - `permissive`: as `required`, but a stage's `sandbox: false` is honoured (with signed runs on, only in runs whose
 *   signature the worker verified), and the stage's result says it ran unsandboxed.
 * - `auto`: sandboxed where the host can, unsandboxed with a warning where it cannot; `sandbox: false` is refused.
 *   The default of `agent-pipeline dev` and `demo` (one person's own machine).
 * - `off`: no sandbox from the worker at all (the operator's own settings decide).
 */
export const SANDBOX_MODES = ['required', 'permissive', 'auto', 'off'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** The worker setting naming the sandbox mode. */
export const SANDBOX_VARIABLE = 'AGENT_PIPELINE_SANDBOX';

/** The mode of a worker whose operator said nothing: it serves others, so it fails closed. */
export const DEFAULT_SANDBOX_MODE: SandboxMode = 'required';

/** Whether the mode insists on the sandbox (fails a stage the host cannot sandbox, locks the settings down). */
export function sandboxRequired(mode: SandboxMode): boolean {
  return mode === 'required' || mode === 'permissive';
}

/**
 * Reads `AGENT_PIPELINE_SANDBOX`. @default `fallback`, which is `required` for a worker
 * @throws Error naming the variable, its value and what is allowed
 */
export function sandboxModeFromEnv(env: NodeJS.ProcessEnv, fallback: SandboxMode = DEFAULT_SANDBOX_MODE): SandboxMode {
  const raw = (env[SANDBOX_VARIABLE] ?? '').trim().toLowerCase();
  if (raw === '') return fallback;
  if ((SANDBOX_MODES as readonly string[]).includes(raw)) return raw as SandboxMode;
  throw new Error(`[CONFIG_INVALID] ${SANDBOX_VARIABLE}=${env[SANDBOX_VARIABLE]} is not one of ${SANDBOX_MODES.join(', ')}; unset it for the default (${fallback})`);
}

/**
 * The mode in words, for the worker's start-up line: what agents' Bash gets and whether a pipeline may switch the
 * sandbox off. `signedRunsOnly`: the worker requires signed runs (AGENT_PIPELINE_TRUSTED_KEYS).
 */
export function describeSandboxMode(mode: SandboxMode, signedRunsOnly: boolean): string {
  switch (mode) {
    case 'required':
      return "required: CLI agents' Bash always runs in Claude Code's sandbox (a stage fails where the host cannot); a pipeline's `sandbox: false` is refused";
    case 'permissive':
      return (
        "permissive: CLI agents' Bash runs in Claude Code's sandbox, but pipelines MAY SWITCH IT OFF with `sandbox: false`" +
        (signedRunsOnly ? ' (in signed runs only)' : ' (in any run: no AGENT_PIPELINE_TRUSTED_KEYS)')
      );
    case 'auto':
      return "auto (the operator's choice): CLI agents' Bash runs sandboxed where the host can, WITHOUT the sandbox where it cannot; a pipeline's `sandbox: false` is refused";
    case 'off':
      return "off (the operator's choice): CLI agents' Bash runs WITHOUT Claude Code's sandbox";
  }
}
