import { LeaseClient } from '../../src/activities/leases/lease-client.js';
import type { BenchmarkResult } from '../lib/results.js';
import type { BenchStack } from '../lib/stack.js';
import { percentile, round } from '../lib/stats.js';

/**
 * What a free concurrency key adds to a stage that holds one (`limits:`): the attempt takes the key before its agent
 * starts (one update-with-start to the key's lease workflow) and gives it back when it ends (one update), both on the
 * stage's path. Measured with the same client calls the stage activity makes, against a worker process that runs the
 * lease workflows. A key whose workflow is not running yet (first use, or idle for 10 minutes) also starts it: the
 * cold figure. Pipelines without `limits:` make none of these calls.
 */
export async function benchLeases(stack: BenchStack, repetitions: number): Promise<BenchmarkResult> {
  const queue = stack.uniqueName('leases');
  const worker = await stack.startWorker(queue, await stack.folder('workspaces'));
  const leases = new LeaseClient(stack.client, queue);
  const timed = async (fn: () => Promise<unknown>): Promise<number> => {
    const start = performance.now();
    await fn();
    return performance.now() - start;
  };
  const cold: number[] = [];
  const acquire: number[] = [];
  const release: number[] = [];
  try {
    // Warm-up: connections, the worker's first workflow task.
    const warmKey = stack.uniqueName('bench-key');
    await (await leases.acquire({ key: warmKey, limit: 1, holder: 'warm-up', ttlMs: 60_000 })).release();
    const key = stack.uniqueName('bench-key');
    for (let i = 0; i < Math.max(3, Math.ceil(repetitions / 4)); i++) {
      const fresh = stack.uniqueName('bench-cold');
      let lease: Awaited<ReturnType<LeaseClient['acquire']>> | undefined;
      cold.push(await timed(async () => (lease = await leases.acquire({ key: fresh, limit: 1, holder: `cold-${i}`, ttlMs: 60_000 }))));
      await lease!.release();
    }
    for (let i = 0; i < repetitions; i++) {
      let lease: Awaited<ReturnType<LeaseClient['acquire']>> | undefined;
      acquire.push(await timed(async () => (lease = await leases.acquire({ key, limit: 2, holder: `stage-${i}`, ttlMs: 60_000 }))));
      release.push(await timed(() => lease!.release()));
    }
  } finally {
    await worker.stop();
  }
  const p50 = (values: number[]): number => round(percentile(values, 50));
  const total = acquire.map((ms, i) => ms + release[i]);
  return {
    name: 'leases',
    title: 'Free lease',
    method:
      `One key (\`limits:\`) taken and given back ${repetitions} times while nobody else holds it, with the LeaseClient calls a stage attempt makes ` +
      `(update-with-start to the key's lease workflow, then the release update), against one worker process; and ${cold.length} keys taken for the first time (their lease workflow starts).`,
    repetitions,
    headline: `p50 ${p50(total)} ms added (take ${p50(acquire)} ms + give back ${p50(release)} ms)`,
    goal: { text: 'report', met: null },
    figures: {
      addedP50Ms: p50(total),
      addedP95Ms: round(percentile(total, 95)),
      acquireP50Ms: p50(acquire),
      releaseP50Ms: p50(release),
      coldAcquireP50Ms: p50(cold),
    },
    notes: [
      'Added to a stage that holds one free key: the take before its agent starts and the give-back before the attempt completes; renewals (every third of the heartbeat timeout) run beside the agent, off its path.',
      `A key used for the first time (or after 10 idle minutes, when its lease workflow closes) starts its workflow: p50 ${p50(cold)} ms.`,
      'A stage or pipeline without `limits:` makes no lease call at all, so every other figure here is unchanged by the feature.',
    ],
    durationS: 0,
  };
}
