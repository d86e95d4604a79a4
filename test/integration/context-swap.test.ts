import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome } from './claude-cli-world.js';
import { stageOf } from './workflow-helpers.js';

/*
 * A `context:` file read `from: workspace` was checked on its path (inside the workspace once symlinks are followed)
 * and then opened by that path again: a stage running alongside, a sandboxed command here, that keeps swapping the
 * file for a symlink to a 0600 key in the worker's home put the key in another stage's prompt whenever the swap fell
 * between the check and the open. With the real worker, Temporal, `srt` and bubblewrap:
 * the key reaches neither the model nor the run's history; each reading stage gets the file or fails CONFIG_INVALID.
 */

const missing = MISSING_SANDBOX_PACKAGES;
const HOME_KEY = 'HOME-KEY-CONTEXT-SWAP-7c41d9e0a2';
const READERS = 24;
const ENTRIES = 5;
const REPORT = '```json\n{"success": true, "summary": "Read the context.", "outputs": {}}\n```';

/** Swaps `c/ctx.md` between a regular file and a symlink to the key, atomically (rename), for `seconds`. */
const SWAPPER =
  'open F, ">c/r0"; print F "benign\\n"; close F; link "c/r0", "c/ctx.md"; my $t = time + $ARGV[1]; ' +
  'while (time < $t) { symlink($ARGV[0], "c/l"); rename("c/l", "c/ctx.md"); link("c/r0", "c/r"); rename("c/r", "c/ctx.md"); }';

let harness: Harness;
let scratch: string;
let homeKey: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'context-swap-'));
  const home = await emptyHome(scratch);
  homeKey = path.join(home, '.ssh', 'id_ed25519');
  await mkdir(path.dirname(homeKey), { recursive: true });
  await writeFile(homeKey, `${HOME_KEY}\n`);
  await chmod(homeKey, 0o600);
  harness = await createHarness('context-swap', {
    scenario: { rules: [{ name: 'read', match: 'CONTEXT-SWAP', repeatLastTurn: true, turns: [{ text: REPORT }] }] },
    env: { HOME: home },
  });
});
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('context files from the workspace', () => {
  test.skipIf(missing.length > 0)(
    "a sandboxed stage swapping a context file for a symlink to the worker's key gets the key into no other stage's prompt",
    { timeout: 240_000 },
    async () => {
      const context = Array.from({ length: ENTRIES }, () => '{ path: c/ctx.md, from: workspace, optional: true }').join(', ');
      const yaml =
        `name: context-swap\nconcurrency: ${READERS + 2}\ncontext: [${context}]\n` +
        'defaults: { retries: 0, heartbeatTimeout: 30s }\nstages:\n' +
        `  - id: swap\n    run: [perl, -e, ${JSON.stringify(`mkdir "c"; ${SWAPPER}`)}, ${JSON.stringify(homeKey)}, "25"]\n    continueOnFailure: true\n` +
        '  - id: wait\n    run: sleep 4\n' +
        Array.from({ length: READERS }, (_, i) => `  - id: r${i + 1}\n    prompt: Read the context CONTEXT-SWAP.\n    backend: anthropic-api\n    model: haiku\n    maxTokens: 500\n    needs: [wait]\n    continueOnFailure: true\n`).join('');
      const handle = await harness.startYaml('context-swap', yaml, 'context-swap-run');
      const state = await harness.finish(handle);
      const readers = Array.from({ length: READERS }, (_, i) => stageOf(state, `r${i + 1}`));
      // Each reader got the file, or was refused it: never anything else. Five reads a stage and twenty-four stages: a
      // stage whose reads all pass the check (and one of which, before the fix, opened the key) is about one in six, so
      // the key reached the model in nineteen runs of twenty; a refused reader proves the swap ran while they read.
      const refused = readers.filter((reader) => reader.status !== 'completed');
      for (const reader of refused) expect(JSON.stringify(reader)).toContain('CONFIG_INVALID');
      expect(refused.length, 'no reader met the swap').toBeGreaterThan(0);
      const sent = JSON.stringify(harness.modelServer.requests().map((r) => r.body));
      expect(sent).not.toContain(HOME_KEY);
      expect(JSON.stringify(await handle.fetchHistory())).not.toContain(HOME_KEY);
    },
  );
});
