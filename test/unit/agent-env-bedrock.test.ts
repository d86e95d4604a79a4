import { describe, expect, test } from 'vitest';
import { agentEnvironment } from '../../src/activities/backends/claude-cli/args.js';

const markers = { stage: 's', worker: 'w' };
const worker = {
  PATH: '/usr/bin',
  AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE0000',
  AWS_SECRET_ACCESS_KEY: 'secret-aws-key-0000',
  AWS_REGION: 'eu-west-1',
  AGENT_PIPELINE_STORE: 's3://bucket',
  AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: 'store-secret-0000',
  AGENT_PIPELINE_AGENT_ENV: 'AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY,AGENT_PIPELINE_STORE',
};

describe("the AWS variables in an agent's environment", () => {
  test('are passed with Bedrock on, and the store settings never', () => {
    const env = agentEnvironment({ ...worker, CLAUDE_CODE_USE_BEDROCK: '1' }, '/cfg', markers);
    expect(env).toMatchObject({ CLAUDE_CODE_USE_BEDROCK: '1', AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE0000', AWS_SECRET_ACCESS_KEY: 'secret-aws-key-0000', AWS_REGION: 'eu-west-1' });
    expect(Object.keys(env).filter((name) => name.startsWith('AGENT_PIPELINE_STORE'))).toEqual([]);
  });

  test('are not passed without Bedrock, nor with it set to 0', () => {
    for (const bedrock of [{}, { CLAUDE_CODE_USE_BEDROCK: '0' }]) {
      const env = agentEnvironment({ ...worker, ...bedrock }, '/cfg', markers);
      expect(Object.keys(env).filter((name) => name.startsWith('AWS_') || name.startsWith('AGENT_PIPELINE_STORE'))).toEqual([]);
    }
  });
});
