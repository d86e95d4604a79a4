import { runAnthropicApi, type AnthropicApiOptions } from './backends/anthropic-api.js';
import { runClaudeCli, type ClaudeCliOptions } from './backends/claude-cli.js';
import { createCloseWorkspace } from './close-workspace.js';
import { createDeliverRun, createMergeStage } from './deliver-run.js';
import { createRunStage } from './run-stage.js';
import { registerSecrets } from './secrets.js';

export interface ActivityDependencies {
  /** Folder under which each run gets its workspace; shared storage when several hosts run workers. */
  workspacesRoot: string;
  cli: ClaudeCliOptions;
  api: AnthropicApiOptions;
}

/** The worker's activities, closed over their dependencies (Temporal's dependency-injection pattern). */
export function createActivities(deps: ActivityDependencies) {
  // The keys never appear in failures, results or the transcripts the activities write.
  registerSecrets([deps.cli.env.ANTHROPIC_API_KEY, deps.cli.env.ANTHROPIC_AUTH_TOKEN, deps.api.client?.apiKey ?? undefined]);
  return {
    runStage: createRunStage({
      workspacesRoot: deps.workspacesRoot,
      backends: {
        'claude-cli': (request) => runClaudeCli(request, deps.cli),
        'anthropic-api': (request) => runAnthropicApi(request, deps.api),
      },
    }),
    // The worker's environment (the agents' too): its PATH finds `gh`, its GH_TOKEN authenticates it.
    deliverRun: createDeliverRun({ workspacesRoot: deps.workspacesRoot, env: deps.cli.env }),
    closeWorkspace: createCloseWorkspace({ workspacesRoot: deps.workspacesRoot }),
    mergeStage: createMergeStage({ workspacesRoot: deps.workspacesRoot }),
  };
}
