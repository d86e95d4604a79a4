import type { ResolvedStage } from './stage-options.js';

/** Permission modes in which Claude Code runs Bash commands that `allowedTools` does not name. */
const BASH_WITHOUT_ALLOW_LIST = new Set(['acceptEdits', 'bypassPermissions', 'auto', 'default']);

/**
 * Whether a CLI stage's agent may run Bash at all: allowed by name (`Bash`, `Bash(git status:*)`), or by a permission
 * mode that lets commands through. Such stages get Claude Code's sandbox by default.
 */
export function stageMayUseBash(stage: Pick<ResolvedStage, 'allowedTools' | 'disallowedTools' | 'permissionMode'>): boolean {
  if (stage.disallowedTools?.includes('Bash')) return false;
  if (stage.allowedTools?.some((tool) => tool === 'Bash' || tool.startsWith('Bash('))) return true;
  return BASH_WITHOUT_ALLOW_LIST.has(stage.permissionMode ?? 'dontAsk');
}

/** Whether a `sandbox` option says off (`false`, or `enabled: false`). */
export function sandboxOptionOff(option: ResolvedStage['sandbox']): boolean {
  return option === false || (typeof option === 'object' && option.enabled === false);
}

/**
 * Whether a stage asks to run its agent's Bash without Claude Code's sandbox (`sandbox: false`, or `enabled: false`):
 * only a worker whose operator allows it honours that (`AGENT_PIPELINE_SANDBOX=permissive`); others refuse the stage.
 * A stage that cannot run Bash has nothing to sandbox, so its `sandbox: false` asks for nothing.
 */
export function stageOptsOutOfSandbox(stage: Pick<ResolvedStage, 'allowedTools' | 'disallowedTools' | 'permissionMode' | 'sandbox'>): boolean {
  return stageMayUseBash(stage) && sandboxOptionOff(stage.sandbox);
}
