import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { agentSecretValues, detectAgentAuth, extraAgentVariables } from '../../src/activities/backends/claude-cli/agent-auth.js';
import { agentEnvironment } from '../../src/activities/backends/claude-cli/args.js';
import { testFolder } from '../helpers/test-folder.js';

const markers = { stage: 's', worker: 'w' };

describe('agent authentication', () => {
  test.each([
    [{ ANTHROPIC_API_KEY: 'sk-ant-1234567890' }, 'api-key'],
    [{ ANTHROPIC_AUTH_TOKEN: 'tok-1234567890' }, 'auth-token'],
    [{ CLAUDE_CODE_OAUTH_TOKEN: 'sk-ant-oat01-123' }, 'oauth-token'],
    [{ CLAUDE_CODE_USE_BEDROCK: '1', AWS_PROFILE: 'prod' }, 'bedrock'],
    [{ CLAUDE_CODE_USE_VERTEX: '1', CLOUD_ML_REGION: 'us-east5', ANTHROPIC_VERTEX_PROJECT_ID: 'p' }, 'vertex'],
    [{ AGENT_PIPELINE_CLAUDE_SETTINGS: '{"apiKeyHelper": "/usr/local/bin/get-key"}' }, 'api-key-helper'],
    [{ AGENT_PIPELINE_CLAUDE_SETTINGS: '{"model": "opus"}' }, undefined],
    [{}, undefined],
  ])('%j is recognised as %s', (env, mode) => {
    expect(detectAgentAuth(env)).toBe(mode);
  });

  test('an apiKeyHelper in a settings file counts as credentials', async () => {
    const file = path.join(await testFolder('auth-'), 'settings.json');
    await writeFile(file, JSON.stringify({ apiKeyHelper: 'echo key' }));
    expect(detectAgentAuth({ AGENT_PIPELINE_CLAUDE_SETTINGS: file })).toBe('api-key-helper');
    expect(detectAgentAuth({ AGENT_PIPELINE_CLAUDE_SETTINGS: path.join(file, 'missing') })).toBeUndefined();
  });

  test('every auth variable reaches the agent; other worker variables do not, unless AGENT_PIPELINE_AGENT_ENV names them', () => {
    const env = {
      PATH: '/bin',
      CLAUDE_CODE_OAUTH_TOKEN: 'oauth-value-123',
      CLAUDE_CODE_USE_BEDROCK: '1',
      AWS_ACCESS_KEY_ID: 'AKIA0000000000',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-value',
      AWS_BEARER_TOKEN_BEDROCK: 'bedrock-bearer-value',
      CLOUD_ML_REGION: 'us-east5',
      GOOGLE_APPLICATION_CREDENTIALS: '/creds.json',
      GH_TOKEN: 'ghp_1234567890',
      SSH_AUTH_SOCK: '/tmp/ssh.sock',
      DATABASE_PASSWORD: 'not-for-agents',
      AGENT_PIPELINE_AGENT_ENV: 'GH_TOKEN, SSH_AUTH_SOCK,,bad name',
    };
    const agent = agentEnvironment(env, '/cfg', markers);
    for (const name of ['CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CODE_USE_BEDROCK', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_BEARER_TOKEN_BEDROCK', 'CLOUD_ML_REGION', 'GOOGLE_APPLICATION_CREDENTIALS', 'GH_TOKEN', 'SSH_AUTH_SOCK']) {
      expect(agent[name], name).toBe(env[name as keyof typeof env]);
    }
    expect(agent.DATABASE_PASSWORD).toBeUndefined();
    expect(agentEnvironment({ ...env, AGENT_PIPELINE_AGENT_ENV: undefined }, '/cfg', markers).GH_TOKEN).toBeUndefined();
    expect(extraAgentVariables(env)).toEqual(['GH_TOKEN', 'SSH_AUTH_SOCK']);
    // Credentials and everything passed on request are secrets; settings like the region are not.
    expect(agentSecretValues(env).sort()).toEqual(['AKIA0000000000', 'aws-secret-value', 'bedrock-bearer-value', 'ghp_1234567890', 'oauth-value-123', '/tmp/ssh.sock'].sort());
  });
});
