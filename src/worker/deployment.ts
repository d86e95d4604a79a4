import type { WorkerDeploymentOptions } from '@temporalio/worker';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gitEnvironment, safeGitArgs } from '../activities/workspace/git-safety.js';
import { ConfigError } from '../config.js';
import { WORKFLOW_CODE_VERSION } from '../workflows/code-version.js';

/**
 * Worker Deployment Versioning (docs/deployment.md, "Deploys that never break a waiting run"): a worker started with
 * `AGENT_PIPELINE_DEPLOYMENT` joins that Worker Deployment under a build id, and every run it starts is PINNED to
 * that build: it finishes on the code it started with, however long it waits for a person and whatever is deployed
 * meanwhile. New runs go to the deployment's current version (`agent-pipeline deploy set-current BUILD`).
 */

/** A worker's place in a Worker Deployment. */
export interface DeploymentVersion {
  deploymentName: string;
  buildId: string;
}

const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The worker's deployment version from `AGENT_PIPELINE_DEPLOYMENT` and `AGENT_PIPELINE_BUILD_ID`; undefined when
 * the deployment is not set (an unversioned worker, as on the dev server and in the quick start).
 * @param workflowBundle the prebuilt workflow bundle, whose hash names the build when there is no git commit to
 * @throws ConfigError for a build id or deployment name Temporal would refuse
 */
export function deploymentFromEnv(env: NodeJS.ProcessEnv, workflowBundle?: string): DeploymentVersion | undefined {
  const deploymentName = env.AGENT_PIPELINE_DEPLOYMENT?.trim();
  if (!deploymentName) return undefined;
  const buildId = env.AGENT_PIPELINE_BUILD_ID?.trim() || defaultBuildId(workflowBundle);
  for (const [name, value] of [['AGENT_PIPELINE_DEPLOYMENT', deploymentName], ['AGENT_PIPELINE_BUILD_ID', buildId]] as const) {
    // Temporal joins the two with ':' into the version string, and caps identifiers at 255 bytes.
    if (value.includes(':') || value.length > 200) {
      throw new ConfigError(`[CONFIG_INVALID] ${name}=${value} must not contain ":" and must be at most 200 characters`);
    }
  }
  return { deploymentName, buildId };
}

/** The SDK's options for a versioned worker: every workflow it starts is pinned to its build. */
export function pinnedDeploymentOptions(version: DeploymentVersion): WorkerDeploymentOptions {
  return { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}

/**
 * The package version, the workflow code version and the git commit of the checkout (`0.1.0+wf1.3f9c2ab1d4e5`);
 * without git (a container image) the hash of the workflow bundle stands in for the commit (`0.1.0+wf1.b1a2b3c4d5e6`),
 * since that is the code a pinned run depends on; failing both, no suffix. A bump of WORKFLOW_CODE_VERSION (a change
 * that breaks runs in flight) always gives a new build id, even from the same commit of a dirty checkout.
 */
export function defaultBuildId(workflowBundle?: string): string {
  const { version } = JSON.parse(readFileSync(`${PACKAGE_ROOT}package.json`, 'utf8')) as { version: string };
  const prefix = `${version}+wf${WORKFLOW_CODE_VERSION}`;
  const commit = gitCommit();
  if (commit) return `${prefix}.${commit}`;
  if (workflowBundle && existsSync(workflowBundle)) return `${prefix}.b${createHash('sha256').update(readFileSync(workflowBundle)).digest('hex').slice(0, 12)}`;
  return prefix;
}

function gitCommit(): string | undefined {
  try {
    const commit = execFileSync('git', ['-C', PACKAGE_ROOT, ...safeGitArgs(['rev-parse', '--short=12', 'HEAD'])], { env: gitEnvironment(process.env), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5_000 }).trim();
    return /^[0-9a-f]{7,40}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}
