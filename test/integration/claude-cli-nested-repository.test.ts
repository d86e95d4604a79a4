import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 33, item 2, end to end: the sandboxed agent (real `claude`, real bubblewrap, AGENT_PIPELINE_SANDBOX=required)
 * makes a repository `sub` in its workspace through its Bash tool, gives it a clean filter of its own and touches the
 * filtered file. Before the fix, the stage's `commit: true` recorded `sub` as a submodule, and the next git asking
 * whether it was dirty (the next stage's commit, or any status) ran the filter as the worker's user, outside the
 * sandbox. The filter writes a marker outside the workspace, where the sandboxed agent itself cannot write: it must
 * never appear, and the stage fails NESTED_REPOSITORY naming `sub`, before the next stage starts.
 */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let harness: Harness;
let base: string;
let repo: string;
let marker: string;

/** The agent's Bash: the nested repository, its filter (set after its own commit, so its own git never runs it), the touch. */
function plantCommand(): string {
  return [
    'git init -q --separate-git-dir="$PWD/subgd" sub',
    'cd sub',
    "printf 'a.txt filter=x\\n' > .gitattributes",
    'echo one > a.txt',
    'git add -A',
    'git -c user.name=agent -c user.email=agent@localhost commit -q -m planted',
    `printf '#!/bin/sh\\necho "ran in $PWD" >> ${marker}\\ncat\\n' > ../clean.sh`,
    'chmod +x ../clean.sh',
    'git config filter.x.clean "$PWD/../clean.sh"',
    "touch -d '2001-01-01 00:00' a.txt",
    'echo planted',
  ].join(' && ');
}

beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'claude-cli-nested-'));
  repo = path.join(base, 'repo');
  marker = path.join(base, 'filter-ran');
  await initRepo(repo, { 'README.md': '# Widgets\n' });
  harness = await createHarness('claude-cli-nested', {
    env: { AGENT_PIPELINE_SANDBOX: 'required', GH_TOKEN: 'ghp_nested-repository-probe' },
    scenario: {
      rules: [
        { name: 'plant', match: 'Stage: plant ·', turns: [{ tool: { name: 'Bash', input: { command: plantCommand(), description: 'plant' } } }, { text: report('Planted.') }] },
        { name: 'next', match: 'Stage: next ·', turns: [{ tool: { name: 'Bash', input: { command: 'echo next > next.txt', description: 'next' } } }, { text: report('Next.') }] },
      ],
    },
  });
}, 60_000);
afterAll(async () => {
  await harness?.close();
  if (base) await rm(base, { recursive: true, force: true });
});

describe("a repository an agent made in its workspace, and the worker's git", () => {
  test.skipIf(MISSING_SANDBOX_PACKAGES.length > 0)(
    'never runs its clean filter: the stage that made it fails NESTED_REPOSITORY naming it, and nothing is committed',
    { timeout: 180_000 },
    async () => {
      const yaml = [
        'name: nested',
        `workspace: { repo: ${repo} }`,
        'defaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 30s, stallTimeout: 2m, permissionMode: dontAsk, allowedTools: [Bash] }',
        'stages:',
        '  - { id: plant, prompt: Plant it., commit: true }',
        '  - { id: next, needs: [plant], prompt: "Carry on. {{workspace.diff}}", commit: true }',
      ].join('\n');
      const state = await harness.finish(await harness.startYaml('nested', yaml, 'nested-1'));
      expectNoStageLeftRunning(state);
      // The agent's Bash did plant it, in the sandbox.
      const planted = harness.modelServer.requests().filter((r) => r.rule === 'plant');
      expect(JSON.stringify(planted.at(-1)?.body)).toContain('planted');
      expect(existsSync(path.join(harness.runDir('nested-1'), 'sub', '.git'))).toBe(true);

      expect(existsSync(marker) ? await readFile(marker, 'utf8') : '', 'the planted filter ran outside the sandbox').toBe('');
      expect(state.status).toBe('failed');
      const plant = stageOf(state, 'plant');
      expect(plant.error?.type, JSON.stringify(plant)).toBe('NESTED_REPOSITORY');
      expect(plant.error?.message).toContain('a .git in "sub"');
      expect(plant.error?.message).toContain('remove that .git (or its folder)');
      // Nothing of the stage was committed, and the next stage never started.
      expect(await git(repo, 'rev-parse', 'agent/nested-1')).toBe(await git(repo, 'rev-parse', 'main'));
      expect(harness.modelServer.requests().filter((r) => r.rule === 'next')).toEqual([]);
    },
  );
});
