import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pushBranch } from '../../src/activities/delivery/push.js';
import { findRunInputProblems, RUN_INPUT_VERSION } from '../../src/pipeline/run-input.js';
import { cloneBare, git, initRepo } from '../helpers/git-repo.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/*
 * Issue 19, reproduction 2: `workspace.push.remote` reached git as an option. With `--receive-pack=<command>`, git
 * ran the command in the worker's environment; a URL pushed the run's branch anywhere. Real git, real repositories.
 */

const EXPLOIT = (marker: string) => `--receive-pack=touch ${marker}; false`;

let base: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'git-arguments-'));
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const pipelineWith = (workspace: string, stage = '{ id: a, prompt: hi }') => `name: p\nworkspace: ${workspace}\nstages:\n  - ${stage}\n`;

describe('workspace.push.remote', () => {
  it('is refused by validate when it is an option, a URL or a path', () => {
    for (const remote of ['"--receive-pack=touch pwned; false"', 'https://example.com/x.git', '../elsewhere.git', '-u']) {
      expect(pipelineProblems(pipelineWith(`{ repo: ., push: { remote: ${remote} } }`)).join('\n'), remote).toContain('workspace.push.remote');
    }
    expect(pipelineProblems(pipelineWith('{ repo: ., push: { remote: upstream-2 } }'))).toEqual([]);
  });

  it('is refused by the workflow\'s input check', () => {
    const pipeline = { name: 'p', workspace: { repo: '.', push: { remote: '--upload-pack=x' } }, stages: [{ id: 'a', prompt: 'x' }] };
    const problems = findRunInputProblems({ version: RUN_INPUT_VERSION, pipeline, baseDir: '/tmp/p', pipelineFile: 'p.yaml', inputs: {} });
    expect(problems.map((p) => p.path)).toContain('pipeline.workspace.push.remote');
  });

  it('never reaches git as an option: a push to "--receive-pack=…" runs nothing and fails naming the remote', async () => {
    const repo = path.join(base, 'repo');
    await initRepo(repo, { 'a.txt': 'a\n' });
    await cloneBare(repo, path.join(base, 'remote.git'));
    await git(repo, 'remote', 'add', 'origin', path.join(base, 'remote.git'));
    const marker = path.join(base, 'pwned');
    const pushed = pushBranch({ dir: repo, remote: EXPLOIT(marker), branch: 'main', rebaseOnce: true }).catch((err: unknown) => err);
    const error = await pushed;
    expect(existsSync(marker), 'git ran the --receive-pack command').toBe(false);
    expect(String(error)).toMatch(/not a remote configured in the repository \(configured: origin\)/);
  });

  it('must be a configured remote, not a path or a URL that would push the branch elsewhere', async () => {
    const repo = path.join(base, 'repo');
    await initRepo(repo, { 'a.txt': 'a\n' });
    await cloneBare(repo, path.join(base, 'other.git'));
    await expect(pushBranch({ dir: repo, remote: path.join(base, 'other.git'), branch: 'main', rebaseOnce: false })).rejects.toThrow(/not a remote configured/);
    await expect(pushBranch({ dir: repo, remote: 'other.git', branch: 'main', rebaseOnce: false })).rejects.toThrow(/not a remote configured/);
  });
});

describe('tool names', () => {
  it('starting with "-" are refused in allowedTools and disallowedTools', () => {
    expect(pipelineProblems(pipelineWith('{ repo: . }', '{ id: a, prompt: hi, allowedTools: [Read, "--dangerously-skip-permissions"] }')).join('\n')).toContain('stages[0].allowedTools[1]');
    expect(pipelineProblems(pipelineWith('{ repo: . }', '{ id: a, prompt: hi, disallowedTools: ["-p"] }')).join('\n')).toContain('stages[0].disallowedTools[0]');
    expect(pipelineProblems(pipelineWith('{ repo: . }', '{ id: a, prompt: hi, allowedTools: [Read, "Bash(npm test:*)"] }'))).toEqual([]);
  });
});
