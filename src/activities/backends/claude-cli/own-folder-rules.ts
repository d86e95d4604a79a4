import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { STORE_VARIABLE } from '../../../store/store-settings.js';

/*
 * Claude Code's Read, Write and Edit tools run in the CLI, not in the sandbox, and a pipeline that allows `Write`
 * allows it on any path the worker's user may write. The workers' own folder under the workspaces root holds every
 * run's bookkeeping (settings files, transcripts, sessions) and the unpacked run bundles other runs read their
 * prompts from, and the default object store (`store/`: checkpoints with every run's sessions and files, claimed
 * payloads) with the checkpoints' work folder (`scratch/`), the records of folders lent to runs (`lent/`, which an
 * agent rewriting its own would free its folder to be a run's repository), and the locks the worker processes share
 * (`locks/`: a lock an agent kept fresh would hold a run's restore up): the attempt's settings deny the file tools all
 * of it, whatever the pipeline allows (deny rules win over allow rules). Stage worktrees (`isolation: stage`) live
 * there too and are agents' trees, so they stay open.
 */

/** What the file tools may never read or write, relative to the workers' own folder (gitignore patterns, as the CLI reads them). */
const DENIED = ['bundles/**', 'runs/*/claude/**', 'runs/*/stages/**', 'runs/*/*.json', 'store/**', 'scratch/**', 'lent/**', 'locks/**'];

/**
 * Permission rules denying Claude Code's file tools the workers' own folder `workerFolder` (its path as given and, when
 * a symlink leads there, its real path): `Read(//abs/…)` covers the reading tools, `Edit(//abs/…)` every editing one.
 */
export function ownFolderDenyRules(workerFolder: string, env: NodeJS.ProcessEnv = {}): string[] {
  const folders = [...new Set([path.resolve(workerFolder), realOrSelf(workerFolder)])];
  // `//` starts an absolute path in a rule (a single `/` would be relative to the settings file).
  const own = folders.flatMap((folder) => DENIED.flatMap((pattern) => ['Read', 'Edit', 'Write'].map((tool) => `${tool}(/${folder}/${pattern})`)));
  return [...own, ...storeFolderDenyRules(env)];
}

/** The same for a `file://` store the operator put elsewhere (`AGENT_PIPELINE_STORE`): every run's checkpoints. */
function storeFolderDenyRules(env: NodeJS.ProcessEnv): string[] {
  const value = env[STORE_VARIABLE]?.trim();
  if (!value?.startsWith('file:')) return [];
  let dir: string;
  try {
    dir = fileURLToPath(value);
  } catch {
    return [];
  }
  const folders = [...new Set([path.resolve(dir), realOrSelf(dir)])];
  return folders.flatMap((folder) => ['Read', 'Edit', 'Write'].map((tool) => `${tool}(/${folder}/**)`));
}

/** `settings` with `rules` added to its `permissions.deny` (after any the operator gave). */
export function withDeniedRules(settings: Record<string, unknown>, rules: string[]): Record<string, unknown> {
  if (rules.length === 0) return settings;
  const permissions = settings.permissions !== null && typeof settings.permissions === 'object' && !Array.isArray(settings.permissions) ? (settings.permissions as Record<string, unknown>) : {};
  const deny = Array.isArray(permissions.deny) ? permissions.deny : [];
  return { ...settings, permissions: { ...permissions, deny: [...deny, ...rules] } };
}

function realOrSelf(folder: string): string {
  try {
    return realpathSync(folder);
  } catch {
    return path.resolve(folder);
  }
}
