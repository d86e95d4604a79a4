import { describe, expect, test } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { defaultBuildId, deploymentFromEnv, pinnedDeploymentOptions } from '../../src/worker/deployment.js';
import { WORKFLOW_CODE_VERSION } from '../../src/workflows/code-version.js';

describe('worker deployment settings', () => {
  test('without AGENT_PIPELINE_DEPLOYMENT the worker is unversioned, as on the dev server', () => {
    expect(deploymentFromEnv({ AGENT_PIPELINE_BUILD_ID: 'x' })).toBeUndefined();
  });

  test('a deployment with an explicit build id pins every run to that build', () => {
    const version = deploymentFromEnv({ AGENT_PIPELINE_DEPLOYMENT: 'prod', AGENT_PIPELINE_BUILD_ID: '2024-06-01.3' });
    expect(version).toEqual({ deploymentName: 'prod', buildId: '2024-06-01.3' });
    expect(pinnedDeploymentOptions(version!)).toEqual({ version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' });
  });

  test('the default build id is the package version, the workflow code version and the git commit', () => {
    expect(defaultBuildId()).toMatch(new RegExp(`^0\\.1\\.0\\+wf${WORKFLOW_CODE_VERSION}(\\.[0-9a-f]{12}|\\.b[0-9a-f]{12})?$`));
    expect(deploymentFromEnv({ AGENT_PIPELINE_DEPLOYMENT: 'prod' })?.buildId).toBe(defaultBuildId());
  });

  test('a build id Temporal would refuse stops the worker with the variable and the rule', () => {
    expect(() => deploymentFromEnv({ AGENT_PIPELINE_DEPLOYMENT: 'prod', AGENT_PIPELINE_BUILD_ID: 'a:b' })).toThrow(ConfigError);
    expect(() => deploymentFromEnv({ AGENT_PIPELINE_DEPLOYMENT: 'prod', AGENT_PIPELINE_BUILD_ID: 'a:b' })).toThrow('[CONFIG_INVALID] AGENT_PIPELINE_BUILD_ID=a:b must not contain ":"');
  });
});
