import type { Client } from '@temporalio/client';
import { describeDeployment, type DeploymentStatus } from '../../src/worker/deployment-control.js';
import { eventually } from './cli-helpers.js';

/** The deployment as `deploy status --json` shows it, read in the test's process: a command costs a Node process. */
export function deploymentStatus(client: Client, deployment: string): Promise<DeploymentStatus | undefined> {
  return describeDeployment(client.workflowService, client.options.namespace, deployment);
}

/** Waits until a worker of `buildId` has polled `deployment`: `deploy set-current` refuses a build none has. */
export async function untilBuildPolled(client: Client, deployment: string, buildId: string): Promise<void> {
  await eventually(() => deploymentStatus(client, deployment), (status) => status?.versions.some((v) => v.buildId === buildId) === true, 60_000, `build ${buildId} polling the deployment`);
}
