import type { ResolvedStage } from '../../../pipeline/stage-options.js';
import { stageMayUseBash, stageOptsOutOfSandbox } from '../../../pipeline/stage-tools.js';
import { SANDBOX_INSTALL, type SandboxHost } from './sandbox-host.js';
import { SANDBOX_VARIABLE, sandboxRequired, type SandboxMode } from './sandbox-mode.js';

/*
 * Whether one attempt's agent runs in Claude Code's sandbox: the worker's mode decides, the stage may only narrow it.
 * A stage's `sandbox: false` switches the sandbox off only where the operator said pipelines may (`permissive`, and
 * with signed runs on only in a run whose signature the worker verified); anywhere else the stage is refused before
 * its agent starts, since whoever starts a run must never switch off the operator's protection.
 */

/** What the worker knows of the run an attempt belongs to, for a stage that asks to go unsandboxed. */
export interface RunSigning {
  /** Whether the worker requires signed runs (`AGENT_PIPELINE_TRUSTED_KEYS`). */
  required: boolean;
  /** The key that signed the run, as the worker verified it when the run started; absent for a run never verified. */
  signedBy?: string;
}

/** What the worker decided about one attempt's sandbox. */
export interface SandboxDecision {
  /** Whether the settings turn the sandbox on. */
  enabled: boolean;
  /** Said in the stage result (and so in `status`) when the stage runs with less than it asked for, or unsandboxed. */
  warnings: string[];
  /** With `required` or `permissive`: why the host cannot sandbox the stage, which fails it (`SANDBOX_UNAVAILABLE`). */
  unavailable?: { reason: string; missing: string[] };
  /** The stage asked to go unsandboxed where it may not, which fails it (`SANDBOX_OPT_OUT_REFUSED`): why, and the fix. */
  refused?: { message: string; hint: string };
}

/** Why a host cannot sandbox, in words, or undefined when it can. */
function describeUnavailable(host: SandboxHost): string | undefined {
  if (host.missing.length > 0) return `${host.missing.join(' and ')} ${host.missing.length > 1 ? 'are' : 'is'} not installed on the worker`;
  if (host.refused) return `bubblewrap cannot create the sandbox's namespaces on the worker (${host.refused})`;
  return undefined;
}

/** Whether the stage's `sandbox` option asks for the sandbox: its value, or by default whether it may run Bash. */
function asksForSandbox(stage: ResolvedStage): boolean {
  const option = stage.sandbox;
  if (option === undefined) return stageMayUseBash(stage);
  return typeof option === 'boolean' ? option : option.enabled !== false;
}

/**
 * Decides whether an attempt is sandboxed, from the worker's mode, the stage's option, the host and the run's
 * signature. A stage that cannot run Bash has nothing to sandbox: its `sandbox: false` changes nothing and is never
 * refused, and it is never failed for the host.
 */
export function decideSandbox(stage: ResolvedStage, mode: SandboxMode, host: SandboxHost, signing: RunSigning = { required: false }): SandboxDecision {
  if (stageOptsOutOfSandbox(stage)) return decideOptOut(mode, signing);
  const asked = asksForSandbox(stage);
  const bash = stageMayUseBash(stage);
  if (mode === 'off') return { enabled: false, warnings: [] };
  const unavailable = describeUnavailable(host);
  if (sandboxRequired(mode)) {
    // Not slowed by the sandbox's start-up (its proxy adds about 0.1 s to every agent's start) unless it asks for it.
    if (!bash) return { enabled: stage.sandbox !== undefined && asked && unavailable === undefined, warnings: [] };
    return { enabled: true, warnings: [], ...(unavailable ? { unavailable: { reason: unavailable, missing: host.missing } } : {}) };
  }
  if (!asked) return { enabled: false, warnings: [] };
  if (unavailable) {
    const fix = host.missing.length > 0 ? `install with \`${SANDBOX_INSTALL}\`` : 'see docs/deployment.md for containers';
    return {
      enabled: false,
      warnings: [`the agent's Bash ran WITHOUT Claude Code's sandbox: ${unavailable} (${fix}, or set ${SANDBOX_VARIABLE}=required to fail such stages instead)`],
    };
  }
  return { enabled: true, warnings: [] };
}

/** A stage that may run Bash and says `sandbox: false` (its own, or the pipeline's `defaults`). */
function decideOptOut(mode: SandboxMode, signing: RunSigning): SandboxDecision {
  const field = "its `sandbox: false` (the stage's, or the pipeline's `defaults`) asks to run the agent's Bash without Claude Code's sandbox";
  const instead = 'drop `sandbox: false` (let the worker commit with `commit: true`, and list the hosts Bash needs in `sandbox.allowedDomains`)';
  if (mode === 'off') {
    return { enabled: false, warnings: [`the agent's Bash ran WITHOUT Claude Code's sandbox: the worker runs every agent unsandboxed (${SANDBOX_VARIABLE}=off)`] };
  }
  if (mode !== 'permissive') {
    return {
      enabled: true,
      warnings: [],
      refused: {
        message: `${field}, and this worker does not let pipelines switch its sandbox off (${SANDBOX_VARIABLE}=${mode}); the agent was not started`,
        hint: `${instead}, or run the stage on a worker whose operator set ${SANDBOX_VARIABLE}=permissive`,
      },
    };
  }
  if (signing.required && signing.signedBy === undefined) {
    return {
      enabled: true,
      warnings: [],
      refused: {
        message: `${field}, and this worker (${SANDBOX_VARIABLE}=permissive with AGENT_PIPELINE_TRUSTED_KEYS) honours it only in runs whose signature it verified when they started; this run's was not; the agent was not started`,
        hint: `start the run again signed by a trusted key (AGENT_PIPELINE_SIGNING_KEY on the client), or ${instead}`,
      },
    };
  }
  const signer = signing.signedBy === undefined ? '' : `, in a run signed by ${signing.signedBy}`;
  return {
    enabled: false,
    warnings: [`the agent's Bash ran WITHOUT Claude Code's sandbox: the stage says \`sandbox: false\` and the worker lets pipelines switch it off (${SANDBOX_VARIABLE}=permissive${signer})`],
  };
}
