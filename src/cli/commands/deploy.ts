import type { Command } from 'commander';
import type { DeploymentStatus } from '../../worker/deployment-control.js';
import { withClient } from '../connect.js';
import { UsageError } from '../errors.js';
import { formatColumns, formatTime, printJson, printLine } from '../output.js';

interface DeployOptions {
  deployment?: string;
  json?: boolean;
}

/** `--deployment`, else `AGENT_PIPELINE_DEPLOYMENT`, as the workers have it. */
function deploymentName(opts: DeployOptions): string {
  const name = opts.deployment ?? process.env.AGENT_PIPELINE_DEPLOYMENT;
  if (!name) throw new UsageError('name the Worker Deployment: --deployment NAME, or set AGENT_PIPELINE_DEPLOYMENT as the workers have it');
  return name;
}

function statusLines(status: DeploymentStatus): string[] {
  const lines = [
    `Deployment ${status.deploymentName}`,
    `  current: ${status.currentBuildId ?? '(none: new runs go to unversioned workers)'}${status.rampingBuildId ? ` · ramping: ${status.rampingBuildId}` : ''}`,
    '',
    ...formatColumns([['BUILD', 'STATUS', 'CREATED'], ...status.versions.map((v) => [v.buildId, v.status, v.createdAt ? formatTime(v.createdAt) : ''])]),
  ];
  if (status.versions.some((v) => v.status === 'draining')) lines.push('', 'Draining builds still have pinned runs: keep their workers until they show drained.');
  if (status.versions.some((v) => v.status === 'drained')) lines.push('', 'Drained builds have no open runs left: their workers can be stopped.');
  return lines;
}

export function addDeployCommands(program: Command): void {
  const deploy = program
    .command('deploy')
    .description('release a new worker build safely: runs stay pinned to the build they started on (docs/deployment.md)');

  deploy
    .command('status')
    .description('show which build new runs go to, and which older builds are still draining their pinned runs')
    .option('--deployment <name>', 'Worker Deployment name (default: AGENT_PIPELINE_DEPLOYMENT)')
    .option('--json', 'print {deploymentName, currentBuildId, rampingBuildId, versions: [{buildId, status, createdAt}]}')
    .addHelpText('after', '\nStatus of a build: current, ramping, draining (pinned runs left), drained (none left: stop its workers), inactive (never current).')
    .action(async (opts: DeployOptions) => {
      const name = deploymentName(opts);
      // Loaded here, as every command's own modules are (docs/performance.md, "Command start-up").
      const { describeDeployment } = await import('../../worker/deployment-control.js');
      await withClient(async ({ client, namespace }) => {
        const status = await describeDeployment(client.workflowService, namespace, name);
        if (!status) throw new UsageError(`[DEPLOYMENT_NOT_FOUND] no Worker Deployment "${name}" in namespace ${namespace}: start a worker with AGENT_PIPELINE_DEPLOYMENT=${name}`);
        if (opts.json) return printJson(status);
        statusLines(status).forEach((line) => printLine(line));
      });
    });

  deploy
    .command('set-current')
    .description('send new runs to this build; runs already started finish on the build they are pinned to')
    .argument('<build>', 'build id of a worker that polls now (AGENT_PIPELINE_BUILD_ID; `deploy status` lists them)')
    .option('--deployment <name>', 'Worker Deployment name (default: AGENT_PIPELINE_DEPLOYMENT)')
    .option('--json', 'print the deployment status afterwards, as `deploy status --json`')
    .action(async (build: string, opts: DeployOptions) => {
      const name = deploymentName(opts);
      const { describeDeployment, setCurrentBuild } = await import('../../worker/deployment-control.js');
      await withClient(async ({ client, namespace }) => {
        const before = await describeDeployment(client.workflowService, namespace, name);
        if (!before?.versions.some((v) => v.buildId === build)) {
          const known = before?.versions.map((v) => v.buildId).join(', ') || '(none)';
          throw new UsageError(`[BUILD_NOT_FOUND] no worker of build "${build}" has polled deployment ${name}; known builds: ${known}. Start the new workers first`);
        }
        await setCurrentBuild(client.workflowService, namespace, name, build, client.options.identity ?? 'agent-pipeline deploy');
        const after = await describeDeployment(client.workflowService, namespace, name);
        if (opts.json) return printJson(after);
        printLine(`New runs of ${name} now go to build ${build}${before.currentBuildId && before.currentBuildId !== build ? ` (was ${before.currentBuildId}, which keeps its pinned runs until they finish)` : ''}.`);
        printLine('Watch the old build drain: agent-pipeline deploy status');
      });
    });
}
