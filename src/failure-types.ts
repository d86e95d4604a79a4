/*
 * The failure catalogue, a leaf every layer may import: the pipeline layer validates `retry.nonRetryable` against its
 * names, workflows map them to retry policies, activities throw them (activities/failures.ts builds the failures).
 */

/**
 * The failure catalogue: every way a stage attempt can fail, with a stable `type`, whether Temporal
 * should retry it, and what a person can do about it (`hint`, appended to messages that bring no
 * advice of their own). Activities throw only failures made by `stageFailure`.
 */
export const FAILURES = {
  /** Thrown when the pipeline or stage configuration cannot work (bad frontmatter, a system prompt without `{{stage_prompt}}`, a path outside the workspace, a bad git repo or branch). */
  CONFIG_INVALID: { nonRetryable: true, hint: 'fix the pipeline file and start a new run' },
  /** Thrown when a file or folder the pipeline names (agent definition, step template, context file, system prompt, `addDirs` entry) does not exist. */
  FILE_NOT_FOUND: { nonRetryable: true, hint: 'paths in a pipeline file are relative to its folder; fix the path or create the file' },
  /** Thrown when a run's file bundle (the files `start` carried into the run) is missing from its history or does not match its hashes. */
  BUNDLE_INVALID: { nonRetryable: true, hint: 'start the run again; `start --files-from-worker` reads the files on the worker instead' },
  /** Thrown when a stage's declared `inputs:` file is missing from the workspace: the earlier stage that should have written it did not. */
  INPUT_NOT_FOUND: { nonRetryable: true, hint: 'check the earlier stage\'s transcript, or fix the path in `inputs:`' },
  /** Thrown when a step template or system prompt uses a variable the run does not define. */
  TEMPLATE_VARIABLE_UNKNOWN: { nonRetryable: true, hint: 'fix the variable name, or add the stage it refers to under `needs`' },
  /** Thrown when the `claude` binary cannot be found or started. */
  CLI_NOT_INSTALLED: { nonRetryable: true, hint: 'run `npm ci` in the agent-pipeline folder, or set CLAUDE_BIN to the claude binary' },
  /** Thrown when the worker requires Claude Code's sandbox (`AGENT_PIPELINE_SANDBOX=required`, the default, or `permissive`) and the host cannot provide it (bubblewrap or socat missing, or no user namespaces). */
  SANDBOX_UNAVAILABLE: { nonRetryable: true, hint: 'install bubblewrap and socat on the worker (`apt-get install -y bubblewrap socat`); in a container see docs/deployment.md' },
  /** Thrown when a stage that may run Bash says `sandbox: false` and the worker does not let pipelines switch its sandbox off (only `AGENT_PIPELINE_SANDBOX=permissive` does, with signed runs on only in signed runs); its agent was not started. */
  SANDBOX_OPT_OUT_REFUSED: { nonRetryable: true, hint: 'drop `sandbox: false` from the stage, or run it on a worker whose operator set AGENT_PIPELINE_SANDBOX=permissive' },
  /** Thrown when no API key is configured for the backend. */
  API_KEY_MISSING: { nonRetryable: true, hint: 'set ANTHROPIC_API_KEY (or, for CLI stages, another way Claude Code authenticates) in the environment of the worker and restart it' },
  /** Thrown when the API rejects the key (401) or the account lacks permission (403). */
  API_KEY_REJECTED: { nonRetryable: true, hint: 'check ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL) where the worker runs, then restart the worker' },
  /** Thrown when the API refuses the request as malformed (400, 413), or the model does not exist (404). */
  INVALID_REQUEST: { nonRetryable: true, hint: 'check the stage\'s `model` and `maxTokens`, and the prompt size' },
  /** Thrown when the pipeline's budget is spent before a stage starts, or the stage spent its own cap. */
  BUDGET_EXCEEDED: { nonRetryable: true, hint: 'raise `maxBudgetUsd` or `budgetUsd` in the pipeline file, or approve more budget for the run' },
  /** Thrown when the agent's answer lacks a valid report block; retryable `contractRetries` times, then not. */
  OUTPUT_CONTRACT_VIOLATION: { nonRetryable: false, hint: 'the agent must end with a fenced JSON block {"success", "summary", "outputs"}; make the step template or agent file ask for it' },
  /** Thrown when an answer's `outputs` (one entry or all together) or `feedback` is over its cap (see pipeline/output-caps.ts). */
  OUTPUT_TOO_LARGE: { nonRetryable: true, hint: 'have the agent write large results to a file in the workspace and report its path in `outputs` (later stages read it with `inputs:`)' },
  /** Thrown when the stage left out files its `expects:` names; retried once in the same session, then not. */
  OUTPUT_MISSING: { nonRetryable: false, hint: 'the step template must ask for the files `expects:` names, at those paths' },
  /**
   * Used for a stage whose agent reported `success: false`. The attempt itself returns
   * `status: 'failed'` with the agent's `error` (so cost and artifacts still reach the workflow),
   * and the workflow records the stage's failure with this type.
   */
  AGENT_REPORTED_FAILURE: { nonRetryable: true, hint: 'read the agent\'s error and transcript; retry the stage once the cause is fixed' },
  /** Thrown when the API answered 429; retried (while the stage has `retries` left) after the API's `retry-after`. */
  RATE_LIMITED: { nonRetryable: false, hint: 'the attempt is retried after the delay the API asked for while the stage has `retries` left; lower the number of stages running at once if it keeps happening' },
  /** Thrown when the API answered 529 (overloaded), also mid-stream. */
  OVERLOADED: { nonRetryable: false, hint: 'the API is overloaded; the attempt is retried with backoff while the stage has `retries` left' },
  /** Thrown when the API answered 5xx (or 408/409). */
  SERVER_ERROR: { nonRetryable: false, hint: 'a server-side problem; the attempt is retried with backoff while the stage has `retries` left' },
  /** Thrown when the API could not be reached or the connection broke. */
  CONNECTION_ERROR: { nonRetryable: false, hint: 'check the network and ANTHROPIC_BASE_URL of the worker; the attempt is retried with backoff while the stage has `retries` left' },
  /** Thrown when nobody decided a mid-turn permission request or question within `permissionRequest.timeout` and its `onTimeout` is `fail`; the agent was stopped. */
  PERMISSION_TIMED_OUT: { nonRetryable: true, hint: 'decide sooner, raise `permissionRequest.timeout`, or set `permissionRequest.onTimeout: deny`' },
  /** Thrown when a person rejected what the agent asked mid-turn (`reject`); the agent was stopped. */
  REJECTED: { nonRetryable: true, hint: 'start a new run once the stage asks for what it should' },
  /** Thrown when the agent produced no output for the stall timeout and was stopped. */
  AGENT_STALLED: { nonRetryable: false, hint: 'raise `stallTimeout` (or `firstOutputTimeout`) if the agent needs longer silences' },
  /** Thrown when the CLI exited without a final result (crash, signal, unexpected exit code). */
  CLI_CRASHED: { nonRetryable: false, hint: 'the stage\'s transcript shows the CLI\'s last events; the attempt is retried while the stage has `retries` left' },
  /** Thrown when the API's answer was empty or only whitespace. */
  RESPONSE_EMPTY: { nonRetryable: false, hint: 'the attempt is retried while the stage has `retries` left; if it keeps happening, check the prompt and the model' },
  /** Thrown when the run's workspace cannot be prepared or written (disk full, git worktree busy). */
  WORKSPACE_ERROR: { nonRetryable: false, hint: 'check the workspaces folder (AGENT_PIPELINE_WORKSPACES) on the worker: space, permissions, git state' },
  /** Thrown when a git command on the run's worktree failed without a conflict (a stage's merge or commit: a hook, a lock, local changes in the way); the message is git's. */
  GIT_FAILED: { nonRetryable: false, hint: 'git\'s message says why; fix it in the run\'s worktree (see `agent-pipeline status`), then `agent-pipeline retry RUN --stage STAGE`' },
  /** Thrown when a completed stage's worktree holds a git repository its agent made (a `.git` below the top): the worker commits nothing rather than run git over it (docs/security.md). */
  NESTED_REPOSITORY: { nonRetryable: true, hint: "remove the .git the message names from the run's worktree, or have the agent keep clones outside the workspace; then retry the stage or start a new run" },
  /** Thrown when pushing the run's branch failed for another reason than a rejection: unknown remote, credentials, network. */
  PUSH_FAILED: { nonRetryable: false, hint: 'check `workspace.push.remote` and the git credentials of the worker (`git push` must work there without a prompt)' },
  /** Thrown when a command stage's command (`run:`) exited with a code other than 0 or was killed by a signal; the details hold the exit code and the end of its stderr. */
  COMMAND_FAILED: { nonRetryable: false, hint: "the command's output is in `agent-pipeline logs RUN --stage STAGE`; the attempt is retried while the stage has `retries` left (list COMMAND_FAILED in `retry.nonRetryable` to make a failure final)" },
  /** Thrown when the object store (`AGENT_PIPELINE_STORE`: checkpoints, payloads too large for history) could not be reached or refused a request. */
  STORE_UNAVAILABLE: { nonRetryable: false, hint: 'check AGENT_PIPELINE_STORE and its AGENT_PIPELINE_STORE_* settings on the worker (endpoint, credentials, bucket); the attempt is retried while the stage has `retries` left' },
  /** Thrown when the worker hit an unexpected error (a bug); the cause holds the original. */
  INTERNAL_ERROR: { nonRetryable: false, hint: 'the attempt is retried while the stage has `retries` left; please report it with the cause if it persists' },
} as const satisfies Record<string, { nonRetryable: boolean; hint: string }>;

export type FailureType = keyof typeof FAILURES;

/** Every failure type a stage attempt can throw, in catalogue order. */
export const FAILURE_TYPES = Object.keys(FAILURES) as [FailureType, ...FailureType[]];
