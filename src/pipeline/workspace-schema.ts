import { z } from 'zod';

/*
 * `workspace:` of the pipeline file: where a run works (a worktree of a repository, or an existing folder), its
 * branch, and how its work is delivered (push, pull request) and cleaned up. Part of the pipeline file schema
 * (schema.ts).
 */

/**
 * The name of a git remote configured in the repository (`origin`), never a URL or a path: a value git could read as
 * an option (`--receive-pack=…`) or as somewhere else to push to.
 */
export const REMOTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** `workspace:`: the run works in a worktree of `repo`, or in the existing folder `dir`; without either, in a folder of its own. */
export const workspaceSchema = z.strictObject({
  /** A git repository (relative to the pipeline file); each run works in its own worktree of it. */
  repo: z.string().min(1).optional(),
  /**
   * An existing folder the run works in instead of a folder of its own (a caller's worktree, a shared folder): a
   * path relative to the pipeline file, or a template such as `{{inputs.worktree}}`. It must lie inside a folder the
   * worker allows (`AGENT_PIPELINE_ALLOWED_PATHS`); one run at a time writes in it. Exclusive with `repo`.
   */
  dir: z.string().min(1).optional(),
  /**
   * With `dir`: this run works in the folder at the same time as other runs that say `shared: true` too (one run per
   * task on one shared folder); a run without it still has the folder to itself, waiting for the shared ones to end.
   * Never a folder inside or around one lent to another run. @default false
   */
  shared: z.boolean().optional(),
  /** The run's branch; a template, e.g. `agent/{{run.id}}`. */
  branch: z.string().min(1).optional(),
  /** The commit or branch the worktree starts from. @default HEAD */
  base: z.string().min(1).optional(),
  /** Push the run's branch once the run has completed (after `finally`). */
  push: z
    .strictObject({
      /** The git remote to push to: a remote's name in the repository, never a URL or a path. @default origin */
      remote: z.string().regex(REMOTE_NAME, 'expected the name of a remote configured in the repository, such as origin (not a URL or a path)').optional(),
      /** A rejected push: `rebase-once` (pull --rebase once, push again, a conflict fails), `ask` (same, a conflict waits for a person), `fail`. @default rebase-once */
      onConflict: z.enum(['rebase-once', 'ask', 'fail']).optional(),
    })
    .optional(),
  /** Open a pull request after the push (templates); needs `push`. */
  pullRequest: z
    .strictObject({
      /** The pull request's title: a template (`{{run.id}}`, `{{inputs.NAME}}`, `{{stages.ID.summary}}`). */
      title: z.string().min(1),
      /** The pull request's description: a template, as `title`. @default none */
      body: z.string().optional(),
      /** The branch to merge into. @default the repository's default branch */
      base: z.string().min(1).optional(),
      /** Open it as a draft. @default false */
      draft: z.boolean().optional(),
    })
    .optional(),
  /** When the run's worktree is removed at the end of the run. @default always (kept) */
  keep: z.enum(['always', 'onFailure', 'never']).optional(),
});
