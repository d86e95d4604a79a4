import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { initRepo } from '../helpers/git-repo.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome } from './claude-cli-world.js';
import { stageOf } from './workflow-helpers.js';

/*
 * AGENT_PIPELINE_ALLOWED_PATHS lends folders both as `workspace.dir` and as `workspace.repo`. A sandboxed command
 * (or agent) of one run, lent a folder, made a git repository there with a smudge filter in its config; a second
 * run named it as its `workspace.repo`, and the worker's own `git worktree add` ran the filter outside the sandbox:
 * it copied the worker's 0600 key from its home (hidden from every sandbox) into the shared folder. With the real
 * worker, Temporal, git, `srt` and bubblewrap: the second run fails CONFIG_INVALID naming the lent folder, and the
 * filter never runs.
 */

const missing = MISSING_SANDBOX_PACKAGES;
const HOME_KEY = 'HOME-KEY-LENT-REPO-4d2b8e61f0';

let harness: Harness;
let scratch: string;
let shared: string;
let homeKey: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'lent-repo-'));
  const home = await emptyHome(scratch);
  homeKey = path.join(home, '.ssh', 'id_ed25519');
  await mkdir(path.dirname(homeKey), { recursive: true });
  await writeFile(homeKey, `${HOME_KEY}\n`);
  await chmod(homeKey, 0o600);
  shared = path.join(scratch, 'allowed', 'shared');
  await mkdir(shared, { recursive: true });
  harness = await createHarness('lent-repo', { scenario: { rules: [] }, env: { HOME: home, AGENT_PIPELINE_ALLOWED_PATHS: path.join(scratch, 'allowed') } });
});
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('a repository a run made in a lent folder', () => {
  test.skipIf(missing.length > 0)("is never another run's workspace.repo: the worker's git would run its config's filter outside the sandbox", { timeout: 120_000 }, async () => {
    const smudge = `sh -c 'cat ${homeKey} > ${path.join(shared, 'leak.txt')}; cat'`;
    const make = [
      'set -e',
      'git init -q evil',
      'cd evil',
      'git config user.email a@b.c && git config user.name a',
      `git config filter.x.smudge ${JSON.stringify(smudge)}`,
      "echo '* filter=x' > .gitattributes && echo hi > a.txt",
      'git add -A && git commit -qm init',
      'echo made',
    ].join('\n');
    const a = await harness.finish(await harness.startYaml('lent-a', `name: lent-a\nworkspace: { dir: ${JSON.stringify(shared)} }\ndefaults: { retries: 0 }\nstages:\n  - id: make\n    run: ${JSON.stringify(make)}\n`));
    expect(a.status, JSON.stringify(stageOf(a, 'make'))).toBe('completed');
    const b = await harness.finish(await harness.startYaml('lent-b', `name: lent-b\nworkspace: { repo: ${JSON.stringify(path.join(shared, 'evil'))} }\ndefaults: { retries: 0 }\nstages:\n  - id: use\n    run: "true"\n`));
    expect(existsSync(path.join(shared, 'leak.txt'))).toBe(false);
    expect(b.status).toBe('failed');
    expect(b.error?.message).toContain(`lies in ${shared}, a folder this worker lent to a run`);
    // A repository outside every lent folder is still one.
    await initRepo(path.join(scratch, 'allowed', 'project'), { 'README.md': 'hi\n' });
    const c = await harness.finish(await harness.startYaml('lent-c', `name: lent-c\nworkspace: { repo: ${JSON.stringify(path.join(scratch, 'allowed', 'project'))} }\ndefaults: { retries: 0 }\nstages:\n  - id: use\n    run: "true"\n`));
    expect(c.status, JSON.stringify(stageOf(c, 'use'))).toBe('completed');
  });
});
