import type { Command } from 'commander';
import { EXIT } from '../errors.js';
import { printNote } from '../output.js';

export function addWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description('run a worker against the configured Temporal server; SIGTERM drains it')
    .option('--health-check', 'exit 0 if the worker on this host polls (its AGENT_PIPELINE_HEALTH_FILE is fresh), else 1; for container health checks')
    .addHelpText(
      'after',
      '\nConnection: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE (docs/deployment.md).\n' +
        'Worker: AGENT_PIPELINE_TASK_QUEUE, AGENT_PIPELINE_WORKSPACES (shared storage with several hosts),\n' +
        '  AGENT_PIPELINE_MAX_CONCURRENT_STAGES (8), AGENT_PIPELINE_MAX_CONCURRENT_WORKFLOW_TASKS (40),\n' +
        '  AGENT_PIPELINE_SHUTDOWN_GRACE (30s), AGENT_PIPELINE_SHUTDOWN_FORCE (60s), AGENT_PIPELINE_HEALTH_FILE,\n' +
        '  AGENT_PIPELINE_LOG_LEVEL (INFO), AGENT_PIPELINE_LOG_FORMAT (json when stderr is not a terminal, else text).\n' +
        'Agents: ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, Bedrock or Vertex variables,\n' +
        '  AGENT_PIPELINE_CLAUDE_SETTINGS with an apiKeyHelper), ANTHROPIC_BASE_URL, CLAUDE_BIN,\n' +
        '  AGENT_PIPELINE_AGENT_ENV (more variables for agents, e.g. GH_TOKEN,SSH_AUTH_SOCK; kept secret).\n' +
        'Trust: AGENT_PIPELINE_TRUSTED_KEYS (who may start runs), AGENT_PIPELINE_DECISION_KEYS (who may decide),\n' +
        '  AGENT_PIPELINE_ALLOW_WORKER_FILES=1 (run --files-from-worker runs); docs/security.md.\n' +
        'Host folders: AGENT_PIPELINE_ALLOWED_PATHS (lent to runs), AGENT_PIPELINE_PIPELINE_DIRS (pipelines that\n' +
        '  --files-from-worker runs may read; unset, such runs are refused).\n' +
        'On SIGTERM or Ctrl-C running stages get the grace time to finish; then they are cancelled and another worker resumes them.',
    )
    .action(async (opts: { healthCheck?: boolean }) => {
      if (opts.healthCheck) {
        // The health file alone: a container runs this every 15 s, and loading the worker cost it 1.2 CPU-s a check.
        const { checkWorkerHealth } = await import('../../worker/health-file.js');
        const problem = await checkWorkerHealth();
        if (problem) printNote(`unhealthy: ${problem}`);
        process.exitCode = problem ? EXIT.PIPELINE_FAILED : EXIT.OK;
        return;
      }
      // Loaded here: the worker's native runtime would slow every other command's start.
      const { runWorker } = await import('../../worker/run-worker.js');
      try {
        await runWorker();
      } catch (err) {
        // The Temporal SDK's runtime, installed before the worker failed to start, would hold the process open (polling
        // its logs, waiting on SIGTERM for workers that never came): the worker ends once its error is printed.
        setTimeout(() => process.exit(), 1_000).unref();
        throw err;
      }
    });
}
