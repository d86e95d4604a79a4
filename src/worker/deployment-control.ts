import type { Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DeploymentVersion } from './deployment.js';
import { GRPC_STATUS } from '../grpc-errors.js';

/**
 * What a release needs of a Worker Deployment: which build new runs go to, and which older builds still have pinned
 * runs to finish (draining) or none left (drained, safe to stop). Shared by `agent-pipeline deploy` and the worker.
 */

/** The gRPC calls used here; both the client's `Connection` and the worker's `NativeConnection` offer them. */
export type DeploymentService = Pick<Connection['workflowService'], 'describeWorkerDeployment' | 'setWorkerDeploymentCurrentVersion'>;

/** One build of the deployment, as `deploy status` shows it. */
export interface DeploymentVersionStatus {
  buildId: string;
  /** `current`, `ramping`, `draining` (pinned runs left), `drained` (none left: safe to stop), `inactive` (never current). */
  status: string;
  /** @unit milliseconds since the epoch */
  createdAt: number | null;
}

/** `deploy status --json`. */
export interface DeploymentStatus {
  deploymentName: string;
  /** The build new runs go to; null while there is none (they then go to unversioned workers). */
  currentBuildId: string | null;
  rampingBuildId: string | null;
  versions: DeploymentVersionStatus[];
}

const STATUS_NAMES = ['unspecified', 'inactive', 'current', 'ramping', 'draining', 'drained'];

/** The deployment's routing and its builds, newest first; undefined when no worker of it has ever polled. */
export async function describeDeployment(service: DeploymentService, namespace: string, deploymentName: string): Promise<DeploymentStatus | undefined> {
  let response;
  try {
    response = await service.describeWorkerDeployment({ namespace, deploymentName });
  } catch (err) {
    if ((err as { code?: number }).code === GRPC_STATUS.NOT_FOUND) return undefined;
    throw err;
  }
  const info = response.workerDeploymentInfo;
  const routing = info?.routingConfig;
  const versions = (info?.versionSummaries ?? []).map((summary) => ({
    buildId: summary.deploymentVersion?.buildId ?? summary.version?.split(':').slice(1).join(':') ?? '?',
    status: STATUS_NAMES[summary.status ?? 0] ?? 'unspecified',
    createdAt: summary.createTime?.seconds != null ? Number(summary.createTime.seconds) * 1000 : null,
  }));
  versions.sort((a, b) => (b.createdAt ?? 0) - (a.createdAt ?? 0));
  return {
    deploymentName,
    currentBuildId: routing?.currentDeploymentVersion?.buildId || null,
    rampingBuildId: routing?.rampingDeploymentVersion?.buildId || null,
    versions,
  };
}

/** Makes `buildId` the version new runs go to; runs pinned to the others finish where they are. */
export async function setCurrentBuild(service: DeploymentService, namespace: string, deploymentName: string, buildId: string, identity: string): Promise<void> {
  await service.setWorkerDeploymentCurrentVersion({ namespace, deploymentName, buildId, identity });
}

/**
 * A deployment's first worker makes its own build current, so a fresh cluster runs with no release step; later builds
 * wait for `deploy set-current`. Retries while the server has not yet registered the version from the worker's polls.
 * @returns true when this call made the build current
 */
export async function adoptIfFirstBuild(
  service: DeploymentService,
  namespace: string,
  version: DeploymentVersion,
  options: { identity: string; attempts?: number; intervalMs?: number; signal?: AbortSignal },
): Promise<boolean> {
  const attempts = options.attempts ?? 60;
  for (let i = 0; i < attempts && !options.signal?.aborted; i++) {
    const status = await describeDeployment(service, namespace, version.deploymentName).catch(() => undefined);
    if (status?.currentBuildId) return false;
    if (status?.versions.some((v) => v.buildId === version.buildId)) {
      try {
        await setCurrentBuild(service, namespace, version.deploymentName, version.buildId, options.identity);
        return true;
      } catch {
        // Another first worker of the same deployment may have won the race; the next look tells.
      }
    }
    await sleep(options.intervalMs ?? 1_000, undefined, { signal: options.signal }).catch(() => undefined);
  }
  return false;
}

/** Runs {@link adoptIfFirstBuild} for a versioned worker until it succeeds, gives up, or the returned controller aborts. */
export function adoptFirstBuildInBackground(worker: Worker, logger: { info(message: string, meta?: Record<string, unknown>): void }): AbortController {
  const controller = new AbortController();
  const version = worker.options.workerDeploymentOptions?.version;
  if (version && worker.connection) {
    void adoptIfFirstBuild(worker.connection.workflowService, worker.options.namespace, version, { identity: worker.options.identity, signal: controller.signal }).then(
      (adopted) => adopted && logger.info('made this build current: the deployment had none, so new runs now come here', { ...version }),
    );
  }
  return controller;
}
