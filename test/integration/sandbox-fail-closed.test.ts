import type { Worker } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES, pathWithout, type HiddenPrograms } from '../helpers/sandbox-host.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 33, item 3: on a host without bubblewrap the default worker ran every agent's Bash unsandboxed (one warning
 * line), and a worker started before bubblewrap was installed went on doing so (it checked its host once). With the
 * real `claude`, a real worker and the real bubblewrap, hidden from the worker's PATH and then installed on it: a
 * worker whose operator said nothing (`required`) fails the Bash stage with SANDBOX_UNAVAILABLE before its agent
 * starts, and runs the next stage in the sandbox once bubblewrap is there, without a restart.
 */

const missing = MISSING_SANDBOX_PACKAGES;
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let harness: Harness;
let hidden: HiddenPrograms;
let outside: string;
let worker: Worker | undefined;
let running: Promise<void> | undefined;

/** The agent's Bash: its allowed work, and a write outside its workspace, which only an unsandboxed agent can make. */
const command = (): string => `echo ran > ran.txt; (echo escaped > '${outside}/escape.txt') 2>/dev/null && echo WROTE-OUTSIDE; echo done`;

beforeAll(async () => {
  if (missing.length > 0) return;
  outside = await mkdtemp(path.join(tmpdir(), 'sandbox-fail-closed-outside-'));
  hidden = await pathWithout(['bwrap']);
  harness = await createHarness('fail-closed', {
    worker: false,
    scenario: { rules: [{ name: 'work', match: 'Pipeline: closed-', turns: [{ tool: { name: 'Bash', input: { command: command() } } }, { text: report('Worked.') }] }] },
  });
  // The worker as `agent-pipeline worker` makes it, on a host without bubblewrap: no AGENT_PIPELINE_SANDBOX at all.
  const env: NodeJS.ProcessEnv = { ...harness.env, PATH: hidden.path, AGENT_PIPELINE_SANDBOX: undefined };
  // A host found without the sandbox is checked again at every attempt (a worker waits 5 s), so the test need not wait.
  worker = await createPipelineWorker({ env, taskQueue: harness.taskQueue, workflowBundlePath: WORKFLOW_BUNDLE, sandboxRecheckMs: 0 });
  running = worker.run();
}, 120_000);
afterAll(async () => {
  await stopTestWorker('the worker without a sandbox setting', worker, running);
  await harness?.close();
  await hidden?.remove();
  if (outside) await rm(outside, { recursive: true, force: true });
});

const PIPELINE = (name: string): string =>
  `name: closed-${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, stallTimeout: 2m, retries: 0 }\n` +
  'stages:\n  - id: work\n    prompt: Work.\n    allowedTools: [Bash]\n';

describe.skipIf(missing.length > 0)('a worker whose operator did not set AGENT_PIPELINE_SANDBOX', () => {
  test('fails a Bash stage with SANDBOX_UNAVAILABLE on a host without bubblewrap, and its agent never starts', { timeout: 120_000 }, async () => {
    const handle = await harness.startYaml('closed-before', PIPELINE('before'));
    const state = await harness.finish(handle);
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('failed');
    const stage = stageOf(state, 'work');
    expect(stage.error?.type, JSON.stringify(stage)).toBe('SANDBOX_UNAVAILABLE');
    expect(stage.error?.message).toContain('AGENT_PIPELINE_SANDBOX=required');
    expect(stage.error?.message).toContain('bubblewrap is not installed on the worker');
    expect(stage.error?.message).toContain('apt-get install -y bubblewrap');
    // Nothing ran: no model call, no file in the workspace, none outside.
    expect(harness.modelServer.requests().filter((r) => r.rule === 'work')).toEqual([]);
    expect(existsSync(path.join(harness.runDir(handle.workflowId), 'ran.txt'))).toBe(false);
    expect(existsSync(path.join(outside, 'escape.txt'))).toBe(false);
  });

  test('runs the next Bash stage in the sandbox once bubblewrap is installed, without a restart', { timeout: 120_000 }, async () => {
    await hidden.install('bwrap');
    const state = await harness.finish(await harness.startYaml('closed-after', PIPELINE('after')));
    expectNoStageLeftRunning(state);
    const stage = stageOf(state, 'work');
    expect(state.status, JSON.stringify(stage)).toBe('completed');
    // Sandboxed: no warning, the allowed work done, the write outside refused.
    expect(stage.result?.warnings).toEqual([]);
    expect(await readFile(path.join(state.workspace!, 'ran.txt'), 'utf8')).toBe('ran\n');
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'work');
    const toolOutput = JSON.stringify((requests.at(-1)!.body as { messages: unknown[] }).messages.at(-1));
    expect(toolOutput).toContain('done');
    expect(toolOutput).not.toContain('WROTE-OUTSIDE');
    expect(existsSync(path.join(outside, 'escape.txt'))).toBe(false);
  });
});
