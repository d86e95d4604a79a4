import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { prepareAgentSettings } from '../../src/activities/backends/claude-cli/agent-settings.js';
import { ownFolderDenyRules, withDeniedRules } from '../../src/activities/backends/claude-cli/own-folder-rules.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';

/*
 * Issue 33, item 4: Claude Code's file tools run outside the sandbox, and `allowedTools: [Write]` lets them write any
 * path the worker's user may. Every attempt's settings deny them the workers' own folder (the bundle cache, every run's
 * records, sessions and stage files); the integration test (bundle-cache-trust) shows the real CLI refusing them.
 */

let base: string;
beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'own-folder-rules-'));
});
afterEach(async () => rm(base, { recursive: true, force: true }));

describe('the file tools and the workers\' own folder', () => {
  it('are denied the cache and every run\'s bookkeeping, by its path and its real path, but not stage worktrees', async () => {
    const real = path.join(base, 'volume', '.agent-pipeline');
    await mkdir(real, { recursive: true });
    await symlink(path.join(base, 'volume'), path.join(base, 'root'));
    const rules = ownFolderDenyRules(path.join(base, 'root', '.agent-pipeline'));
    for (const folder of [path.join(base, 'root', '.agent-pipeline'), real]) {
      for (const tool of ['Read', 'Edit', 'Write']) {
        expect(rules).toEqual(expect.arrayContaining([`${tool}(/${folder}/bundles/**)`, `${tool}(/${folder}/runs/*/stages/**)`, `${tool}(/${folder}/runs/*/claude/**)`, `${tool}(/${folder}/runs/*/*.json)`]));
        // The runs' checkpoints (every run's sessions and files, issue 29) and the folder they are made in.
        expect(rules).toEqual(expect.arrayContaining([`${tool}(/${folder}/store/**)`, `${tool}(/${folder}/scratch/**)`, `${tool}(/${folder}/lent/**)`, `${tool}(/${folder}/locks/**)`]));
      }
    }
    // `//` starts an absolute path in Claude Code's rules; a single `/` would be relative to the settings file.
    expect(rules.every((rule) => /^(Read|Edit|Write)\(\/\//.test(rule))).toBe(true);
    expect(rules.some((rule) => rule.includes('worktrees'))).toBe(false);
  });

  it('are added after the operator\'s own deny rules, in the settings file the attempt gets', async () => {
    expect(withDeniedRules({ permissions: { deny: ['Bash(rm:*)'], allow: ['Read'] } }, ['Edit(//x/**)'])).toEqual({ permissions: { deny: ['Bash(rm:*)', 'Edit(//x/**)'], allow: ['Read'] } });
    expect(withDeniedRules({ model: 'm' }, [])).toEqual({ model: 'm' });
    const definition = { id: 'a', prompt: 'x', allowedTools: ['Read', 'Write'] };
    const stage = resolveStage({ name: 'p', stages: [definition] }, definition);
    const { file } = await prepareAgentSettings(stage, { PATH: process.env.PATH }, { workspaceDir: path.join(base, 'work'), addDirs: [], workspacesRoot: base, claudeConfigDir: path.join(base, 'claude'), stageDir: path.join(base, 'stage') }, { mode: 'off' }, ['Edit(//x/**)']);
    // After the read limits every attempt gets (agent-reads.ts), last.
    expect((JSON.parse(await readFile(file, 'utf8')) as { permissions: { deny: string[] } }).permissions.deny.at(-1)).toBe('Edit(//x/**)');
  });
});
