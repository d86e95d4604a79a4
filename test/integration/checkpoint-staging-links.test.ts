import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { initRepo } from '../helpers/git-repo.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome } from './claude-cli-world.js';
import { stageOf } from './workflow-helpers.js';

/*
 * A run's agent, in its sandbox, reads the worker's key through the worker's own checkpoint. The worker stages the
 * run's worktree (`git add --all`) every `checkpoint.every` while the agent works; git opens each file it found by its
 * path, following links in the folders above it. The agent (real `claude`, real bubblewrap, scripted model) leaves a
 * large file git hashes first and a folder `zz` holding a file named like the key, watches the repository's objects
 * (its sandbox reads `.git`) and, once git writes the first, swaps `zz` for a link to the worker's `~/.ssh`, a path its
 * sandbox hides from it but whose name a link may hold. git then read the key into an object, which the agent printed.
 */

const KEY = 'CKPT-LINK-KEY-7c41e9a02b';
const REPORT = '```json\n{"success": true, "summary": "Worked.", "outputs": {}}\n```';

let harness: Harness;
let scratch: string;
let repo: string;
let sshDir: string;

/** Up to 10 rounds: a new large file, the folder, a wait for git's first object write, the swap, then a look. */
function racingCommand(): string {
  return [
    'objs=$(git rev-parse --path-format=absolute --git-common-dir)/objects',
    'for round in $(seq 1 10); do',
    '  rm -rf zz zz-was; mkdir zz; echo placeholder > zz/id_ed25519',
    '  head -c 16000000 /dev/urandom > aa-large.bin',
    '  before=$(find "$objs" -type f | wc -l); n=0',
    '  while [ "$(find "$objs" -type f | wc -l)" = "$before" ] && [ $n -lt 3000 ]; do n=$((n+1)); done',
    `  mv zz zz-was && ln -s '${sshDir}' zz`,
    '  sleep 2',
    `  if git cat-file --batch-all-objects --batch | grep -a -o '${KEY.slice(0, 14)}[0-9a-f]*'; then break; fi`,
    'done',
    'rm -rf zz zz-was aa-large.bin; echo rounds-done',
  ].join('\n');
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'checkpoint-staging-links-'));
  const home = await emptyHome(scratch);
  sshDir = path.join(home, '.ssh');
  await mkdir(sshDir, { recursive: true });
  await writeFile(path.join(sshDir, 'id_ed25519'), `${KEY}\n`);
  await chmod(path.join(sshDir, 'id_ed25519'), 0o600);
  repo = path.join(scratch, 'repo');
  await initRepo(repo, { 'README.md': 'base\n' });
  harness = await createHarness('checkpoint-staging-links', {
    scenario: { rules: [{ name: 'race', match: 'Pipeline: staging-links', turns: [{ tool: { name: 'Bash', input: { command: racingCommand(), timeout: 240_000 } } }, { text: REPORT }] }] },
    env: { HOME: home, AGENT_PIPELINE_CHECKPOINTS: 'on' },
  });
});
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Whether an object of the repository holds `text`, read as a stream: the agent's rounds leave large objects. */
async function objectsHold(text: string): Promise<boolean> {
  const child = execa('git', ['cat-file', '--batch-all-objects', '--batch'], { cwd: repo, buffer: false });
  let tail = '';
  let found = false;
  for await (const chunk of child.stdout) {
    const seen = tail + Buffer.from(chunk as Uint8Array).toString('latin1');
    found ||= seen.includes(text);
    tail = seen.slice(-text.length);
  }
  await child;
  return found;
}

describe("the worker's checkpoints of a run's worktree", () => {
  test.skipIf(MISSING_SANDBOX_PACKAGES.length > 0)(
    "never read the worker's key through a folder the agent swaps for a link while git stages it",
    { timeout: 420_000 },
    async () => {
      const yaml =
        'name: staging-links\n' +
        'defaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 60s, retries: 0, checkpoint: { every: 1s } }\n' +
        `workspace: { repo: ${JSON.stringify(repo)} }\n` +
        'stages:\n  - id: race\n    prompt: Work.\n    allowedTools: [Bash]\n    sandbox: true\n';
      const state = await harness.finish(await harness.startYaml('staging-links', yaml));
      expect(state.status, JSON.stringify(stageOf(state, 'race'))).toBe('completed');
      const everything = JSON.stringify(harness.modelServer.requests().map((r) => r.body));
      // The agent's rounds ran to their end (the command was not refused), and nothing of the key reached the model.
      expect(everything.includes('rounds-done'), 'the agent ran its rounds to their end').toBe(true);
      expect(everything.includes(KEY), 'the key reached the model').toBe(false);
      expect(await objectsHold(KEY), "the key is among the repository's objects").toBe(false);
      // The race was run: a checkpoint's git met the swapped folder, and found nothing where the link leads.
      expect(JSON.stringify(stageOf(state, 'race').result?.warnings ?? [])).toMatch(/unable to stat 'zz\/id_ed25519'/);
    },
  );
});
