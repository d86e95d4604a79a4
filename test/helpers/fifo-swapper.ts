import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';

/*
 * A process that keeps swapping a file for a FIFO, as a stage running alongside the worker can (hard links renamed over
 * the path: each swap is atomic and costs nothing). A reader that checks the path and then opens it again, or opens it
 * without O_NONBLOCK, sooner or later opens the FIFO and waits for a writer that never comes. On stop, the swapper
 * opens the FIFO for writing without waiting, which releases every open still waiting (so a test that found the hole
 * leaves no libuv thread blocked behind it), and says whether there was one.
 */

const SCRIPT =
  'use POSIX (); use Fcntl; my ($x, $r0, $p0) = @ARGV; POSIX::mkfifo($p0, 0600) or die "mkfifo: $!"; $| = 1; print "ready\\n"; ' +
  'my $stop = 0; $SIG{TERM} = sub { $stop = 1 }; ' +
  'while (!$stop) { link $p0, "$x.l"; rename "$x.l", $x; link $r0, "$x.r"; rename "$x.r", $x; } ' +
  'my $waited = 0; for (1..20) { if (sysopen(W, $p0, O_WRONLY | O_NONBLOCK)) { $waited = 1; close W; } select(undef, undef, undef, 0.02); } ' +
  'link $r0, "$x.r"; rename "$x.r", $x; print $waited ? "waited\\n" : "none\\n";';

export interface FifoSwapper {
  /** Stops swapping (leaving `file` the regular file) and tells whether some open of the FIFO was left waiting. */
  stop(): Promise<{ waited: boolean }>;
}

/**
 * Swaps `file` between a regular file holding `content` and a FIFO until stopped. The two live in a folder made next
 * to `file` (hard links need the same file system), named so that no listing of `file`'s folder sees them.
 */
export async function startFifoSwapper(file: string, content: string | Buffer): Promise<FifoSwapper> {
  const spare = await mkdtemp(path.join(path.dirname(path.dirname(file)), '.fifo-swap-'));
  const regular = path.join(spare, 'r0');
  await writeFile(regular, content);
  const child = spawn('perl', ['-e', SCRIPT, file, regular, path.join(spare, 'p0')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  while (!out.includes('ready\n')) {
    if (child.exitCode !== null) throw new Error(`the FIFO swapper ended at once (exit ${child.exitCode})`);
    await once(child.stdout, 'data');
  }
  return {
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
      return { waited: out.includes('waited\n') };
    },
  };
}

/**
 * Calls `read` `times` times while `file` is swapped for a FIFO; how many calls did not settle within `perCallMs` (each
 * such call waited on the FIFO until the swapper let it go at the end).
 */
export async function countHungReads(file: string, content: string | Buffer, read: () => Promise<unknown>, times = 200, perCallMs = 3_000): Promise<{ hung: number; settled: number }> {
  const swapper = await startFifoSwapper(file, content);
  let hung = 0;
  let settled = 0;
  const pending: Promise<unknown>[] = [];
  try {
    for (let i = 0; i < times; i++) {
      const call = read().then(
        () => undefined,
        () => undefined,
      );
      const outcome = await Promise.race([call.then(() => 'settled' as const), new Promise<'hung'>((resolve) => setTimeout(resolve, perCallMs, 'hung').unref())]);
      if (outcome === 'hung') {
        hung++;
        pending.push(call);
        // Each hung call holds one of libuv's four threads: stop before they are all taken.
        if (hung >= 2) break;
      } else settled++;
    }
  } finally {
    await swapper.stop();
    await Promise.all(pending);
  }
  return { hung, settled };
}
