import { describe, expect, it } from 'vitest';
import { gitEnvironment, safeGitArgs } from '../../src/activities/workspace/git-safety.js';

const WORKER_ENV = {
  PATH: '/usr/bin',
  HOME: '/home/worker',
  LANG: 'C.UTF-8',
  GH_TOKEN: 'gh-token',
  TEMPORAL_API_KEY: 'temporal-key',
  AGENT_PIPELINE_ENCRYPTION_KEY: 'encryption-key',
  ANTHROPIC_API_KEY: 'anthropic-key',
  SSH_AUTH_SOCK: '/tmp/agent.sock',
  GIT_DIR: '/somewhere/else',
  GIT_CONFIG_PARAMETERS: "'core.hooksPath'='/tmp/hooks'",
};

describe('the environment of the worker\'s git', () => {
  it('holds no worker secret and none of git\'s own redirections for a local command', () => {
    const env = gitEnvironment(WORKER_ENV);
    expect(env).toMatchObject({ PATH: '/usr/bin', HOME: '/home/worker', LANG: 'C.UTF-8', GIT_TERMINAL_PROMPT: '0', GIT_SSH_COMMAND: 'ssh' });
    for (const name of ['GH_TOKEN', 'TEMPORAL_API_KEY', 'AGENT_PIPELINE_ENCRYPTION_KEY', 'ANTHROPIC_API_KEY', 'SSH_AUTH_SOCK', 'GIT_DIR', 'GIT_CONFIG_PARAMETERS']) {
      expect(env).not.toHaveProperty(name);
    }
  });

  it('gives a push or pull the credentials it may need, and still no other secret', () => {
    const env = gitEnvironment(WORKER_ENV, 'remote');
    expect(env).toMatchObject({ GH_TOKEN: 'gh-token', SSH_AUTH_SOCK: '/tmp/agent.sock' });
    for (const name of ['TEMPORAL_API_KEY', 'AGENT_PIPELINE_ENCRYPTION_KEY', 'ANTHROPIC_API_KEY']) expect(env).not.toHaveProperty(name);
  });

  it('always names the ssh program, so a repository\'s core.sshCommand never runs', () => {
    expect(gitEnvironment({ GIT_SSH_COMMAND: 'ssh -i /keys/deploy' }).GIT_SSH_COMMAND).toBe('ssh -i /keys/deploy');
    expect(gitEnvironment({ GIT_SSH: "/opt/it's/ssh" }).GIT_SSH_COMMAND).toBe("'/opt/it'\\''s/ssh'");
  });

  it('carries the overrides for a git another program starts (gh)', () => {
    const env = gitEnvironment({});
    const pairs = Array.from({ length: Number(env.GIT_CONFIG_COUNT) }, (_, i) => `${env[`GIT_CONFIG_KEY_${i}`]}=${env[`GIT_CONFIG_VALUE_${i}`]}`);
    expect(pairs).toEqual(expect.arrayContaining(['core.hooksPath=/dev/null', 'core.fsmonitor=false', 'protocol.ext.allow=never']));
  });

  it('tells a git another program starts to start no git inside a submodule', () => {
    const env = gitEnvironment({});
    const pairs = Array.from({ length: Number(env.GIT_CONFIG_COUNT) }, (_, i) => `${env[`GIT_CONFIG_KEY_${i}`]}=${env[`GIT_CONFIG_VALUE_${i}`]}`);
    expect(pairs).toEqual(expect.arrayContaining(['submodule.recurse=false', 'diff.ignoreSubmodules=all', 'fetch.recurseSubmodules=false', 'push.recurseSubmodules=no']));
  });
});

/** The command of `safeGitArgs`'s answer, after its `-c` overrides. */
function commandOf(args: string[]): string[] {
  let at = 0;
  while (args[at] === '-c' && !args[at + 1]!.startsWith('user.')) at += 2;
  return args.slice(at);
}

describe('the arguments of the worker\'s git', () => {
  it('puts the overrides first and keeps the command as it was', () => {
    const args = safeGitArgs(['commit', '--quiet', '-m', 'x']);
    expect(args.slice(0, 6)).toEqual(['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.ext.allow=never']);
    expect(args).toContain('submodule.recurse=false');
    expect(commandOf(args)).toEqual(['commit', '--quiet', '-m', 'x']);
  });

  it('turns off external diffs, textconv and submodules for a diff, also behind -c identity pairs', () => {
    expect(commandOf(safeGitArgs(['-c', 'user.name=a', 'diff', '--cached', '--quiet']))).toEqual([
      '-c',
      'user.name=a',
      'diff',
      '--no-ext-diff',
      '--no-textconv',
      '--ignore-submodules=all',
      '--cached',
      '--quiet',
    ]);
  });

  it('keeps status out of submodules, and push, pull and fetch from recursing into them', () => {
    expect(commandOf(safeGitArgs(['status', '--porcelain']))).toEqual(['status', '--ignore-submodules=all', '--porcelain']);
    expect(commandOf(safeGitArgs(['push', '--porcelain', '--', 'origin', 'a:a']))).toEqual(['push', '--recurse-submodules=no', '--porcelain', '--', 'origin', 'a:a']);
    expect(commandOf(safeGitArgs(['-c', 'user.name=a', 'pull', '--rebase', '--', 'origin', 'b']))).toEqual(['-c', 'user.name=a', 'pull', '--no-recurse-submodules', '--rebase', '--', 'origin', 'b']);
    expect(commandOf(safeGitArgs(['fetch', 'origin']))).toEqual(['fetch', '--no-recurse-submodules', 'origin']);
  });

  it('reads a subcommand named like an object property as a plain subcommand', () => {
    expect(commandOf(safeGitArgs(['constructor', 'x']))).toEqual(['constructor', 'x']);
  });
});
