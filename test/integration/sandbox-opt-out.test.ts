import type { Worker } from '@temporalio/worker';
import { execa, type ResultPromise } from 'execa';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PipelineClient } from '../../src/library/index.js';
import { generateSigningKey } from '../../src/trust/keys.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { createHarness, WORKFLOW_BUNDLE, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { CLI, runCli } from './cli-helpers.js';
import { waitForWorkerPolling } from './worker-health.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 33, item 1: a pipeline whose stage said `sandbox: false` ran its agent's Bash unsandboxed on a default worker,
 * with no warning, and the agent read the worker's GH_TOKEN from /proc/<worker>/environ. Whoever starts a run must
 * never switch off the operator's protection. With the real `claude`, real worker processes holding secrets and the
 * real bubblewrap: a default worker refuses such a stage before its agent starts; a worker whose operator chose
 * `AGENT_PIPELINE_SANDBOX=permissive` runs it unsandboxed (the same probe finds the secret there, which proves the
 * probe) and says so in the stage's result, while its other stages stay sandboxed; with trusted keys it honours
 * `sandbox: false` only in a run whose signature it verified.
 */

const missing = MISSING_SANDBOX_PACKAGES;

/** A secret the workers hold and never give their agents. */
const GH_TOKEN = 'ghp_opt-out-probe-8c1d4e7a2f';
/** Written reversed in the command, so the probe's own processes do not carry it in their arguments or environment. */
const reversed = (value: string): string => [...value].reverse().join('');
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let harness: Harness;
let scratch: string;
let outside: string;

/** Looks for the worker's secret in every environ it can see, and writes outside its workspace. */
function probeCommand(stage: string): string {
  return [
    `S=$(printf %s '${reversed(GH_TOKEN)}' | rev)`,
    'for f in /proc/[0-9]*/environ; do if grep -qaF -e "$S" "$f" 2>/dev/null; then echo "FOUND-SECRET $f"; fi; done',
    `(echo escaped > '${outside}/${stage}.txt') 2>/dev/null && echo WROTE-OUTSIDE`,
    'echo PROBED',
  ].join('; ');
}

const probeRule = (stage: string) => ({ name: stage, match: `Stage: ${stage} ·`, turns: [{ tool: { name: 'Bash', input: { command: probeCommand(stage) } } }, { text: report('Probed.') }] });

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'sandbox-opt-out-'));
  outside = await mkdtemp(path.join(tmpdir(), 'sandbox-opt-out-outside-'));
  harness = await createHarness('opt-out', {
    worker: false,
    scenario: { rules: ['refused', 'off', 'on', 'signed', 'inflight'].map(probeRule) },
  });
});
afterAll(async () => {
  await harness?.close();
  for (const dir of [scratch, outside]) if (dir) await rm(dir, { recursive: true, force: true });
});

const HEADER = (name: string): string =>
  `name: optout-${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, stallTimeout: 2m, retries: 0 }\nstages:\n`;
const BASH_STAGE = (id: string, extra = ''): string => `  - id: ${id}\n    prompt: Probe.\n    allowedTools: [Bash]\n${extra}`;
const OPTED_OUT = '    sandbox: false\n';

/** What the stage's agent saw of its Bash command: the last message of its last model request. */
function probeOutput(rule: string): string {
  const requests = harness.modelServer.requests().filter((r) => r.rule === rule);
  return requests.length === 0 ? '' : JSON.stringify((requests.at(-1)!.body as { messages: unknown[] }).messages.at(-1));
}

/** `agent-pipeline worker` in a process of its own, with the worker's secret in its environment; resolves once it polls. */
async function startWorkerProcess(name: string, extra: NodeJS.ProcessEnv): Promise<{ env: NodeJS.ProcessEnv; child: ResultPromise; stop(): Promise<string> }> {
  const env = { ...harness.env, GH_TOKEN, AGENT_PIPELINE_SANDBOX: undefined, AGENT_PIPELINE_HEALTH_FILE: path.join(scratch, `${name}.health`), AGENT_PIPELINE_LOG_FORMAT: 'json', ...extra };
  const child = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore' });
  await waitForWorkerPolling(env, 60_000, `the ${name} worker`);
  return {
    env,
    child,
    async stop() {
      child.kill('SIGTERM');
      return String((await child).stderr);
    },
  };
}

/** The worker's log lines, parsed. */
const logLines = (stderr: string): Record<string, unknown>[] =>
  stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe.skipIf(missing.length > 0)("a pipeline's `sandbox: false`", () => {
  test('is refused by a worker whose operator said nothing (SANDBOX_OPT_OUT_REFUSED, not retried), and its agent never starts', { timeout: 180_000 }, async () => {
    const worker = await startWorkerProcess('default', {});
    let stderr = '';
    try {
      const handle = await harness.startYaml('optout-default', HEADER('default') + BASH_STAGE('refused', OPTED_OUT));
      const state = await harness.finish(handle);
      expectNoStageLeftRunning(state);
      expect(state.status).toBe('failed');
      const stage = stageOf(state, 'refused');
      expect(stage.error?.type, JSON.stringify(stage)).toBe('SANDBOX_OPT_OUT_REFUSED');
      expect(stage.attempt).toBe(1);
      // The message names the stage, the field, the worker's setting and the one that would allow it.
      expect(stage.error?.message).toContain('stage refused: its `sandbox: false`');
      expect(stage.error?.message).toContain('does not let pipelines switch its sandbox off (AGENT_PIPELINE_SANDBOX=required)');
      expect(stage.error?.message).toContain('AGENT_PIPELINE_SANDBOX=permissive');
      // No agent: no model call, nothing written outside.
      expect(probeOutput('refused')).toBe('');
      expect(existsSync(path.join(outside, 'refused.txt'))).toBe(false);
      // `status` says why.
      expect((await runCli(['status', handle.workflowId], worker.env)).all).toContain('SANDBOX_OPT_OUT_REFUSED');
    } finally {
      stderr = await worker.stop();
    }
    const polling = logLines(stderr).find((l) => l.message === 'agent-pipeline worker polling');
    expect(polling?.sandbox).toMatch(/^required: .*`sandbox: false` is refused/);
  });

  test('runs unsandboxed on a `permissive` worker, which says so at start-up and in the stage result; its other stages stay sandboxed', { timeout: 180_000 }, async () => {
    const worker = await startWorkerProcess('permissive', { AGENT_PIPELINE_SANDBOX: 'permissive' });
    let stderr = '';
    try {
      const handle = await harness.startYaml('optout-permissive', HEADER('permissive') + BASH_STAGE('off', OPTED_OUT) + BASH_STAGE('on', '    needs: [off]\n'));
      const state = await harness.finish(handle);
      expectNoStageLeftRunning(state);
      expect(state.status, JSON.stringify(state.stages)).toBe('completed');
      // The operator allowed it: the agent ran as the worker's user, secrets in reach.
      expect(probeOutput('off')).toContain('FOUND-SECRET');
      expect(probeOutput('off')).toContain('WROTE-OUTSIDE');
      expect(stageOf(state, 'off').result?.warnings).toEqual([
        "the agent's Bash ran WITHOUT Claude Code's sandbox: the stage says `sandbox: false` and the worker lets pipelines switch it off (AGENT_PIPELINE_SANDBOX=permissive)",
      ]);
      // The stage that did not ask stayed in the sandbox.
      expect(probeOutput('on')).toContain('PROBED');
      expect(probeOutput('on')).not.toContain('FOUND-SECRET');
      expect(probeOutput('on')).not.toContain('WROTE-OUTSIDE');
      expect(stageOf(state, 'on').result?.warnings).toEqual([]);
      const status = await runCli(['status', handle.workflowId], worker.env);
      expect(status.all).toContain("off: the agent's Bash ran WITHOUT Claude Code's sandbox");
    } finally {
      stderr = await worker.stop();
    }
    const lines = logLines(stderr);
    expect(lines.find((l) => l.message === 'agent-pipeline worker polling')?.sandbox).toMatch(/^permissive: .*pipelines MAY SWITCH IT OFF with `sandbox: false` \(in any run/);
    expect(lines.some((l) => l.level === 'WARN' && String(l.message).startsWith('AGENT_PIPELINE_SANDBOX=permissive'))).toBe(true);
  });

  describe('on a `permissive` worker with trusted keys', () => {
    const starter = generateSigningKey('starter');
    let worker: Worker | undefined;
    let running: Promise<void> | undefined;
    const start = async (env: NodeJS.ProcessEnv): Promise<void> => {
      worker = await createPipelineWorker({ env, taskQueue: harness.taskQueue, workflowBundlePath: WORKFLOW_BUNDLE });
      running = worker.run();
    };
    const stop = async (): Promise<void> => {
      await stopTestWorker('the permissive worker', worker, running);
      worker = undefined;
    };
    afterAll(stop);
    const keyed = (): NodeJS.ProcessEnv => ({ ...harness.env, AGENT_PIPELINE_SANDBOX: 'permissive', AGENT_PIPELINE_TRUSTED_KEYS: starter.publicLine });

    test('honours it in a run whose signature the worker verified, naming the key', { timeout: 120_000 }, async () => {
      await start(keyed());
      const client = await PipelineClient.connect({ env: harness.env, signingKey: starter.privateLine });
      try {
        const run = await client.start(await harness.writePipeline('optout-signed', HEADER('signed') + BASH_STAGE('signed', OPTED_OUT)));
        const state = await harness.finish(harness.client.workflow.getHandle(run.id));
        expect(state.status, JSON.stringify(state.stages)).toBe('completed');
        expect(probeOutput('signed')).toContain('WROTE-OUTSIDE');
        expect(stageOf(state, 'signed').result?.warnings).toEqual([expect.stringContaining('(AGENT_PIPELINE_SANDBOX=permissive, in a run signed by starter)')]);
      } finally {
        await client.close();
        await stop();
      }
    });

    test('refuses it in a run started before the worker had keys, whose start no worker verified', { timeout: 120_000 }, async () => {
      // Started and checked by a worker without keys (every run trusted, none verified), then continued on one with keys.
      await start({ ...harness.env, AGENT_PIPELINE_SANDBOX: 'permissive' });
      const client = await PipelineClient.connect({ env: harness.env });
      try {
        const yaml = `${HEADER('inflight')}  - id: gate\n    approval: true\n${BASH_STAGE('inflight', `${OPTED_OUT}    needs: [gate]\n`)}`;
        const run = await client.start(await harness.writePipeline('optout-inflight', yaml));
        const handle = harness.client.workflow.getHandle(run.id);
        await waitForWaiting(handle, 'gate', 'approval');
        await stop();
        await start(keyed());
        await client.getRun(run.id).approve({ stage: 'gate' });
        const state = await harness.finish(handle);
        const stage = stageOf(state, 'inflight');
        expect(stage.error?.type, JSON.stringify(stage)).toBe('SANDBOX_OPT_OUT_REFUSED');
        expect(stage.error?.message).toContain('honours it only in runs whose signature it verified when they started');
        expect(probeOutput('inflight')).toBe('');
        expect(existsSync(path.join(outside, 'inflight.txt'))).toBe(false);
      } finally {
        await client.close();
      }
    });
  });
});
