import { shellWord } from './shell-words.js';

/*
 * Which run (workflow) ids a run may have. Temporal accepts any non-empty string, but a run's id also names its
 * folder under the workspaces root: `.` and `..` would name the root itself or the folder above it, which a clean-up
 * then deletes, and a name starting with a dot is the worker's own (`.agent-pipeline`, where it keeps every run's
 * bookkeeping and the unpacked run bundles; `.bundles` in earlier releases), which a run must never get as its
 * workspace. Pure, so `start`, the library and the workflow's input check agree.
 */

/** What an id names: a run, or a schedule (whose runs' ids start with its own). */
type IdKind = 'run' | 'schedule';

/** Why `runId` cannot be a run id (or, `kind` 'schedule', the id of a schedule, whose runs' ids start with it), or `undefined` when it can. */
export function findRunIdProblem(runId: string, kind: IdKind = 'run'): string | undefined {
  if (runId.trim() === '') return `a ${kind} id must not be empty`;
  if (runId === '.' || runId === '..') return `"${runId}" cannot be a ${kind} id: it names a folder, not a run (choose another --id)`;
  if (runId.startsWith('.')) {
    return `${kind} id "${runId}" starts with ".": names starting with a dot under the workspaces folder are the workers' own (their bookkeeping and file cache), never a run's (choose an id that starts with a letter or digit)`;
  }
  return undefined;
}

/**
 * Why a new run (or a schedule, whose runs' ids start with its own) cannot take `id`, or `undefined` when it can:
 * `findRunIdProblem`, and an id starting with "-", which every command that names the run (`agent-pipeline status
 * -x`) would read as an option. Clients check this before they start anything; the workflow's own input check does
 * not, so that a run started under such an id before it was refused (or past our clients) keeps running, and is
 * named after `--` (shell-words.ts).
 */
export function findNewRunIdProblem(id: string, kind: IdKind = 'run'): string | undefined {
  const problem = findRunIdProblem(id, kind);
  if (problem || !id.startsWith('-')) return problem;
  const command = `agent-pipeline ${kind === 'run' ? 'status' : 'schedule describe'} ${shellWord(id)}`;
  return `${kind} id "${id}" starts with "-", which a command line reads as an option (\`${command}\` would fail); choose an id that starts with a letter or digit`;
}
