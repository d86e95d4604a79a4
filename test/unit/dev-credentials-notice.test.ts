import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { describeAgentCredentials } from '../../src/cli/agent-credentials-notice.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

describe('what `dev` says at start about the model its agents will reach', () => {
  test('without a key and without --scenario it warns that agent stages will fail and names both ways out', () => {
    const notice = describeAgentCredentials({}, undefined);
    expect(notice).toMatch(/no ANTHROPIC_API_KEY and no --scenario.*API_KEY_MISSING/);
    expect(notice).toContain('set ANTHROPIC_API_KEY before `agent-pipeline dev`');
    expect(notice).toContain('--scenario FILE');
    expect(notice).toContain('examples/demo/scenario.yaml');
  });

  test('says nothing more when the key or a scenario is given: the stack says which one it uses', () => {
    expect(describeAgentCredentials({ ANTHROPIC_API_KEY: 'sk-test' }, undefined)).toBeUndefined();
    expect(describeAgentCredentials({}, 'scenario.yaml')).toBeUndefined();
  });

  test('says that a scenario is not used when the key is set too', () => {
    expect(describeAgentCredentials({ ANTHROPIC_API_KEY: 'sk-test' }, 's.yaml')).toMatch(/ANTHROPIC_API_KEY is set, so --scenario s\.yaml is not used/);
  });

  test('names another way Claude Code authenticates, and that anthropic-api stages still need the key', () => {
    expect(describeAgentCredentials({ CLAUDE_CODE_OAUTH_TOKEN: 'token' }, undefined)).toMatch(/claude-cli stages authenticate with CLAUDE_CODE_OAUTH_TOKEN.*anthropic-api stages will fail API_KEY_MISSING/);
  });
});

describe('agent-pipeline dev without a key', () => {
  let cwd: string;
  beforeAll(async () => {
    cwd = await mkdtemp(path.join(tmpdir(), 'dev-notice-'));
  });
  afterAll(async () => rm(cwd, { recursive: true, force: true }));

  test('prints the notice first, before the server starts (here: a Temporal CLI that does not exist)', async () => {
    const env = { PATH: process.env.PATH, HOME: cwd, TEMPORAL_CLI: path.join(cwd, 'no-temporal') };
    const result = await execa('node', [path.join(PROJECT_ROOT, 'bin', 'agent-pipeline.js'), 'dev', '--port', '7991'], { cwd, env, extendEnv: false, reject: false, stdin: 'ignore' });
    const stderr = String(result.stderr);
    expect(stderr).toMatch(/^Warning: no ANTHROPIC_API_KEY and no --scenario/);
    expect(stderr).toContain('TEMPORAL_CLI_NOT_FOUND');
  });
});
