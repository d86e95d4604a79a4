import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { stageOf } from './workflow-helpers.js';

/*
 * The worker hashes the files a stage changed (its artifacts) after listing them. A stage running alongside, a
 * sandboxed command here, that keeps swapping a file for a FIFO (hard links renamed over it, costing nothing) made the
 * hash open a FIFO by its path: the open waited for a writer on one of libuv's four threads, so the stage hung (until
 * its timeout, or here until the swapper let go), and a few such stages stalled every file read of the worker. With
 * the real worker, Temporal, `srt` and bubblewrap: every stage ends while the swap still runs, no open of the FIFO is
 * left waiting when the swapper stops, and no artifact is recorded with the hash of what a FIFO gave.
 */

const missing = MISSING_SANDBOX_PACKAGES;
const STAGES = 12;
const SWAP_SECONDS = 45;
const CONTENT = 'benign\n';

/**
 * Swaps `c/x` between the regular file `c/r0` (its modification time renewed each turn, so that `c/x` is a changed
 * file for every stage that ends meanwhile) and the FIFO `c/p0`, for `$ARGV[0]` seconds; then opens the FIFO for writing
 * without waiting, which succeeds (and releases them) only when some open of it for reading is waiting, and writes
 * whether one was into `c/released`.
 */
const SWAPPER =
  'use POSIX (); use Fcntl; mkdir "c"; open F, ">c/r0"; print F "benign\\n"; close F; POSIX::mkfifo("c/p0", 0600) or die "mkfifo: $!"; ' +
  'my $t = time + $ARGV[0]; while (time < $t) { utime undef, undef, "c/r0"; link "c/p0", "c/l"; rename "c/l", "c/x"; link "c/r0", "c/r"; rename "c/r", "c/x"; } ' +
  'my $w = sysopen(W, "c/p0", O_WRONLY | O_NONBLOCK) ? 1 : 0; close W if $w; open R, ">c/released"; print R "$w\\n"; close R;';

/**
 * Each other stage ends 2 s after the swap's first swap, not 2 s after its own start: each command starts in a sandbox
 * of its own, and once in CI, on a loaded machine, every `sleep 2` stage had ended before the swapper's sandbox was
 * up. A stage that never sees the swap fails, saying so.
 */
const SLEEPER = "i=0; until [ -e c/x ] || [ $i -ge 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e c/x ] || { echo 'the swap never started' >&2; exit 1; }; sleep 2";

let harness: Harness;

beforeAll(async () => {
  // A slot for every stage: stages waiting for the swap must never hold the slots the swap needs to start.
  harness = await createHarness('fifo-swap', { scenario: { rules: [] }, env: { AGENT_PIPELINE_MAX_CONCURRENT_STAGES: String(STAGES + 1) } });
});
afterAll(async () => {
  await harness?.close();
});

describe('artifacts of a workspace whose files are swapped for FIFOs', () => {
  test.skipIf(missing.length > 0)(
    'a sandboxed stage swapping a file for a FIFO while other stages end hangs none of them, nor the worker',
    { timeout: 300_000 },
    async () => {
      const yaml =
        `name: fifo-swap\nconcurrency: ${STAGES + 2}\n` +
        'defaults: { retries: 0, heartbeatTimeout: 30s }\nstages:\n' +
        `  - id: swap\n    run: [perl, -e, ${JSON.stringify(SWAPPER)}, "${SWAP_SECONDS}"]\n` +
        Array.from({ length: STAGES }, (_, i) => `  - id: s${i + 1}\n    run: ${JSON.stringify(SLEEPER)}\n`).join('');
      const handle = await harness.startYaml('fifo-swap', yaml, 'fifo-swap-run');
      const state = await harness.finish(handle);
      const swap = stageOf(state, 'swap');
      expect(swap.status, JSON.stringify(swap)).toBe('completed');
      const stages = Array.from({ length: STAGES }, (_, i) => stageOf(state, `s${i + 1}`));
      for (const stage of stages) expect(stage.status, JSON.stringify(stage)).toBe('completed');
      // The swap ran while the stages ended: each of them found `c/x` changed, as a file or a FIFO.
      const swept = stages.filter((stage) => (stage.result?.artifacts ?? []).some((artifact) => artifact.path === 'c/x'));
      expect(swept.length, 'no stage ended while the swap ran').toBeGreaterThan(0);
      // Hashed as the regular file, or left out: never as what a FIFO gave once its writer let it go (nothing).
      const good = createHash('sha256').update(CONTENT).digest('hex');
      for (const stage of swept) expect(stage.result?.artifacts?.find((artifact) => artifact.path === 'c/x')?.sha256, stage.id).toBe(good);
      // No open of the FIFO was still waiting when the swap stopped, after every other stage had long ended.
      expect((await readFile(path.join(harness.runDir('fifo-swap-run'), 'c', 'released'), 'utf8')).trim()).toBe('0');
    },
  );
});
