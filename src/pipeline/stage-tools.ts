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
