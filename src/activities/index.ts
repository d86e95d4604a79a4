import { runAnthropicApi, type AnthropicApiOptions } from './backends/anthropic-api.js';
import { runClaudeCli, type ClaudeCliOptions } from './backends/claude-cli.js';
import { createRunStage, type Backend } from './run-stage.js';
import { registerSecrets } from './secrets.js';

export interface ActivityDependencies {
  /** Folder under which each run gets its workspace; shared storage when several hosts run workers. */
  workspacesRoot: string;
  cli: ClaudeCliOptions;
  api: AnthropicApiOptions;
  /** Backends besides the built-in ones, by the name a stage's `backend:` selects. */
  extraBackends?: Record<string, Backend>;
}

/** The worker's activities, closed over their dependencies (Temporal's dependency-injection pattern). */
export function createActivities(deps: ActivityDependencies) {
  // The keys never appear in failures, results or the transcripts the activities write.
  registerSecrets([deps.cli.env.ANTHROPIC_API_KEY, deps.cli.env.ANTHROPIC_AUTH_TOKEN, deps.api.client?.apiKey ?? undefined]);
  return {
    runStage: createRunStage({
      workspacesRoot: deps.workspacesRoot,
      backends: {
        ...deps.extraBackends,
        'claude-cli': (request) => runClaudeCli(request, deps.cli),
        'anthropic-api': (request) => runAnthropicApi(request, deps.api),
      },
    }),
  };
}
