import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { PipelineClient, type RunEvent, type TranscriptEntry } from '../../src/library/index.js';

/*
 * `run.events()` streams a stage as its agent works (issue 21): the real claude binary calls a tool, the scripted
 * model then takes its time, and the library yields a `stage_progress` event naming the tool before the stage
 * completes. The progress travels in the attempt's heartbeat details, which the server keeps with the pending
 * activity: the run's history does not grow with the heartbeats.
 */

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/library-events');

// Each test follows a run of its own; they run at once on one worker, overlapping the agent's slow turns, the quiet
// wait of the second test and the hand-overs of the third. The second counts its client's reads, so it has a client of
// its own.
describe.concurrent('run.events() streams what the agent does', () => {
  let harness: Harness;
  /** The client of the first and third tests. */
  let client: PipelineClient;

  beforeAll(async () => {
    harness = await createHarness('library-events', { scenario: path.join(FIXTURES, 'scenario.yaml') });
    client = await PipelineClient.connect({ env: harness.env });
  });
  afterAll(async () => {
    await client?.close();
    await harness?.close();
  });

  test('a stage_progress event names the tool call before the stage completes, and heartbeats leave history alone', async () => {
    const run = await client.start(path.join(FIXTURES, 'progress.yaml'));
    const seen: RunEvent[] = [];
    // While the agent waits on the model after its tool call, the pending attempt is read every half second.
    const readings: { historyLength: number; heartbeatAt: number }[] = [];
    let following = true;
    let toolSeen = false;
    const sampler = (async () => {
      while (following) {
        const reading = toolSeen ? await pendingAttempt(harness, run.id).catch(() => undefined) : undefined;
        if (reading) readings.push(reading);
        await sleep(500);
      }
    })();
    // A client that sees the workspaces follows the agent's transcript as it is written, as `logs --follow` does.
    const transcript = (async () => {
      const entries: TranscriptEntry[] = [];
      for await (const entry of run.transcript({ stage: 'look', follow: true, workspacesRoot: harness.workspacesRoot })) entries.push(entry);
      return entries;
    })();
    for await (const event of run.events({ intervalMs: 500 })) {
      seen.push(event);
      if (event.type === 'stage_progress' && event.progress.agent?.tool) toolSeen = true;
      if (event.type === 'stage_completed') following = false;
    }
    following = false;
    await sampler;
    const types = seen.map((e) => `${e.type}${'stage' in e ? ` ${e.stage}` : ''}`);
    const progress = seen.find((e): e is Extract<RunEvent, { type: 'stage_progress' }> => e.type === 'stage_progress' && e.progress.agent?.tool !== undefined);
    expect(progress, types.join(', ')).toBeDefined();
    expect(progress!.progress.agent).toMatchObject({ tool: { name: 'Glob', input: '**/*.md' }, text: 'Looking for the notes first.', toolCalls: 1 });
    expect(progress!.progress.usage?.inputTokens).toBeGreaterThan(0);
    // Before the stage completed, and the run went on to complete.
    expect(types.indexOf('stage_progress look')).toBeLessThan(types.indexOf('stage_completed look'));
    expect(types.at(-1)).toBe('run_ended');
    const entries = await transcript;
    expect(entries[0]).toMatchObject({ type: 'transcript', round: 1, attempt: 1 });
    const lines = entries.flatMap((e) => (e.type === 'line' ? [e.text] : []));
    expect(lines.some((l) => l.includes('"tool_use"') && l.includes('"Glob"'))).toBe(true);
    expect(lines.some((l) => l.includes('"type":"result"'))).toBe(true);
    // Several heartbeats reached the server while the agent waited; the history stayed as it was.
    expect(new Set(readings.map((r) => r.heartbeatAt)).size, JSON.stringify(readings)).toBeGreaterThanOrEqual(2);
    expect(new Set(readings.map((r) => r.historyLength)).size, JSON.stringify(readings)).toBe(1);
  }, 240_000);

  // The test's own onTestFinished: in a concurrent suite the global one may attach to another test (vitest's docs),
  // which closed this client when the hand-over test ended first.
  test('a run waiting for a person is followed by a long-poll, not a read a second, and its approval arrives at once', async ({ onTestFinished }) => {
    const client = await PipelineClient.connect({ env: harness.env });
    onTestFinished(() => client.close());
    const run = await client.start(path.join(FIXTURES, 'gate.yaml'));
    // Counts the reads of the run's state: a poll a second would make one each second of the wait.
    const service = client.temporal.workflowService;
    const describe = service.describeWorkflowExecution.bind(service);
    let reads = 0;
    service.describeWorkflowExecution = ((request: Parameters<typeof describe>[0]) => {
      reads++;
      return describe(request);
    }) as typeof service.describeWorkflowExecution;
    const types: string[] = [];
    try {
      for await (const event of run.events()) {
        types.push(event.type);
        if (event.type !== 'stage_waiting') continue;
        const before = reads;
        await sleep(6_000);
        expect(reads - before, 'reads during a quiet wait of 6 s').toBeLessThanOrEqual(1);
        await run.approve({ stage: 'gate' });
      }
    } finally {
      service.describeWorkflowExecution = describe;
    }
    expect(types).toEqual(['stage_waiting', 'stage_completed', 'run_ended']);
  }, 120_000);

  test('events() follows a run across continue-as-new: every stage once, then the end', async () => {
    const stages = Array.from({ length: 30 }, (_, i) => ({ id: `s${i + 1}`, prompt: `Do step ${i + 1}.`, ...(i > 0 ? { needs: [`s${i}`] } : {}) }));
    const run = await client.start({
      name: 'library-long',
      continueAsNew: { afterEvents: 100 },
      defaults: { backend: 'anthropic-api', model: 'haiku', retries: 0, maxTokens: 500, heartbeatTimeout: '10s' },
      stages,
    });
    const completed: string[] = [];
    let ended: RunEvent | undefined;
    for await (const event of run.events()) {
      if (event.type === 'stage_completed') completed.push(event.stage);
      if (event.type === 'run_ended') ended = event;
    }
    expect(completed).toEqual(stages.map((s) => s.id));
    expect(ended).toMatchObject({ status: 'completed' });
    // The run did hand over to new executions on the way.
    const latest = await harness.client.workflow.getHandle(run.id).describe();
    const first = await harness.client.workflowService.getWorkflowExecutionHistory({ namespace: 'default', execution: { workflowId: run.id, runId: latest.runId }, maximumPageSize: 1 });
    expect(first.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId).toBeTruthy();
  }, 300_000);
});

/** The run's history length and its pending attempt's last heartbeat time, while one is pending. */
async function pendingAttempt(harness: Harness, runId: string): Promise<{ historyLength: number; heartbeatAt: number } | undefined> {
  const description = await harness.client.workflow.getHandle(runId).describe();
  const beat = description.raw.pendingActivities?.[0]?.lastHeartbeatTime;
  if (!beat) return undefined;
  const seconds = typeof beat.seconds === 'number' ? beat.seconds : Number(beat.seconds?.toString() ?? 0);
  return { historyLength: description.historyLength, heartbeatAt: seconds * 1000 + Math.floor((beat.nanos ?? 0) / 1e6) };
}
