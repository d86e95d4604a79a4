import { Client, Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { RunJson } from '../../src/cli/json.js';
import { HISTORY_PAGE_MAX_EVENTS, HISTORY_PAGE_TARGET_BYTES, readHistoryEvents } from '../../src/library/history-pages.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { parseJson, runCli } from './cli-helpers.js';

/** gRPC's default receive limit, which the Temporal client in effect keeps: what a one-message history read hits. */
const GRPC_LIMIT_BYTES = 4 * 1024 * 1024;

const report = (success: boolean, summary: string, outputs: Record<string, string>): string =>
  `Done.\n\`\`\`json\n${JSON.stringify({ success, summary, outputs, ...(success ? {} : { error: 'the last stage fails on purpose' }) })}\n\`\`\``;

/** `s1 → s2 → … → sN` on the API backend. */
function linearYaml(name: string, stages: number): string {
  const lines = [`name: ${name}`, 'defaults: { backend: anthropic-api, model: sonnet, retries: 0, timeout: 2m, heartbeatTimeout: 1m }', 'stages:'];
  for (let i = 1; i <= stages; i++) lines.push(`  - id: s${i}`, `    prompt: Step ${i} of ${name}.`, ...(i > 1 ? [`    needs: [s${i - 1}]`] : []));
  return lines.join('\n') + '\n';
}

/** A harness with a worker that keeps workflows cached, as a production worker does. */
interface World {
  harness: Harness;
  worker: Worker;
  running: Promise<void>;
}

// Each test has a world of its own (its task queue and worker: the second stops its worker): they run at once (issue 32).
describe.concurrent('clients read runs of any size in pages', () => {
  let worlds: World[] = [];

  beforeAll(async () => {
    worlds = await Promise.all(
      ['long', 'wide'].map(async (name): Promise<World> => {
        const harness = await createHarness(`cli-large-${name}`, {
          worker: false,
          // No checkpoints: what a fork would start from is not what these tests read, and a stage's first-start
          // checkpoint (the default) spawned `tar` in bubblewrap from this process for each of the 220 stages (issue 32).
          // The histories are the same: checkpoints are taken inside the stage activity.
          env: { AGENT_PIPELINE_CHECKPOINTS: 'off' },
          scenario: {
            rules: [
              // Each stage of the "wide" pipeline reports two 30 KB outputs: well under the caps, but a dozen of them make a
              // history of several 1 MB pages. Its last stage fails, so `status` without a worker has to rebuild the run from history.
              { name: 'wide-last', match: 'Pipeline: cli-large-wide · Stage: s20 ·', turns: [{ text: report(false, 'Failed at the end.', {}) }] },
              { name: 'wide', match: 'Pipeline: cli-large-wide ·', repeatLastTurn: true, turns: [{ text: report(true, 'W'.repeat(1000), { a: 'a'.repeat(30_000), b: 'b'.repeat(30_000) }) }] },
            ],
            fallback: { text: report(true, 'Done.', {}) },
          },
        });
        // A worker of the test's own: the second test stops it to read its run without a worker.
        const worker = await createPipelineWorker({ env: harness.env, taskQueue: harness.taskQueue, workflowBundlePath: WORKFLOW_BUNDLE });
        return { harness, worker, running: worker.run() };
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await Promise.all(
      worlds.map(async ({ harness, worker, running }) => {
        await stopTestWorker(`the worker of ${harness.taskQueue}`, worker, running);
        await harness.close();
      }),
    );
  });

  test('a 200-stage run started with --wait is followed to its end', async () => {
    const { harness } = worlds[0];
    const file = await harness.writePipeline('long', linearYaml('cli-large-long', 200));
    const id = `cli-large-long-${Date.now()}`;
    const result = await runCli(['start', file, '--id', id, '--wait'], harness.env, 900_000);
    expect(result.stderr).toBe('');
    expect(result.exitCode, result.stdout.slice(-2000)).toBe(0);
    expect(result.stdout).toMatch(/^✔ s200 completed · /m);
    expect(result.stdout).toMatch(new RegExp(`^Run ${id} completed · `, 'm'));
    const status = parseJson<RunJson>(await runCli(['status', id, '--json'], harness.env));
    expect(status.stages).toHaveLength(200);
    expect(status.stages.every((s) => s.status === 'completed')).toBe(true);
  }, 960_000);

  test('start --wait follows a run whose history spans pages to its end, status rebuilds it from history, and a small receive limit still reads it', async () => {
    const { harness, worker, running } = worlds[1];
    const file = await harness.writePipeline('wide', linearYaml('cli-large-wide', 20));
    const id = `cli-large-wide-${Date.now()}`;
    const result = await runCli(['start', file, '--id', id, '--wait', '--json'], harness.env, 300_000);
    expect(result.stderr).not.toMatch(/RESOURCE_EXHAUSTED|larger than max/);
    expect(result.exitCode, result.stderr).toBe(1);
    const final = parseJson<RunJson>(result);
    expect(final.status).toBe('failed');
    expect(final.stages.filter((s) => s.status === 'completed')).toHaveLength(19);
    expect(final.stages[18].result?.outputs.a).toHaveLength(30_000);

    const description = await harness.client.workflow.getHandle(id).describe();
    // The history spans several pages. (Since template values go by reference, a history over 4 MB takes hundreds of
    // stages; the small-limit client below is what shows a history larger than one message is still read whole.)
    expect(description.historySize).toBeGreaterThan(HISTORY_PAGE_TARGET_BYTES);

    // No worker: the status query goes unanswered and the failed run is rebuilt from its history, page by page.
    await stopTestWorker(`the worker of ${harness.taskQueue}`, worker, running);
    const status = await runCli(['status', id, '--json'], harness.env, 120_000);
    expect(status.exitCode, status.stderr).toBe(0);
    const rebuilt = parseJson<RunJson>(status);
    expect(rebuilt.source).toBe('history');
    expect(rebuilt.stages.map((s) => s.status)).toEqual([...Array(19).fill('completed'), 'failed']);
    expect(rebuilt.stages[0].result?.outputs.b).toHaveLength(30_000);

    // Every page stayed under the limit (events grow along this history, so a page may overshoot its 1 MB target),
    // and together they are the whole history.
    const pages: number[] = [];
    let events = 0;
    for await (const _ of readHistoryEvents(harness.client, { workflowId: id, onPage: (p) => pages.push(p.bytes) })) events++;
    expect(events).toBe(description.historyLength);
    expect(pages.length).toBeGreaterThanOrEqual(2);
    expect(Math.max(...pages)).toBeLessThan(GRPC_LIMIT_BYTES);

    // A client with a far smaller receive limit (and no retries of refused calls, to keep the test short) still
    // reads it all: a refused page is asked for again at half the size.
    const small = await Connection.connect({ address: harness.env.TEMPORAL_ADDRESS, channelArgs: { 'grpc.max_receive_message_length': 1024 * 1024 }, interceptors: [] });
    try {
      const sizes: number[] = [];
      let count = 0;
      const oversized = readHistoryEvents(new Client({ connection: small }), { workflowId: id, targetPageBytes: 64 * 1024 * 1024, onPage: (p) => sizes.push(p.pageSize) });
      for await (const _ of oversized) count++;
      expect(count).toBe(description.historyLength);
      // After the first page the reader asked for 500 events (a 64 MB target): refused, and asked for again at half.
      expect(sizes.slice(1).some((n) => n < HISTORY_PAGE_MAX_EVENTS)).toBe(true);
    } finally {
      await small.close();
    }
  }, 420_000);
});
