import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { listenOnLoopback, type LoopbackListener } from '../helpers/loopback-listener.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { runCli } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 33 item 10: a pipeline's `sandbox.allowedDomains: [localhost]` let a sandboxed agent reach the worker host's
 * own services through the sandbox's proxy (the tokenless codec server, Temporal's HTTP API). Here a listener on
 * 127.0.0.1 stands for them, and the scripted agent (real `claude`, real bubblewrap) curls it by `localhost` and by
 * `127.0.0.1` through Bash. `validate` and `start` refuse such a file, naming the field and the value, odd spellings
 * of loopback included; a run started without our client (which skips `validate`) is refused by the worker before
 * any agent runs; a worker whose operator set AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1 lets the agent through.
 */

const missing = MISSING_SANDBOX_PACKAGES;

const REPORT = '```json\n{"success": true, "summary": "Called home.", "outputs": {}}\n```';

/** The worker host's own service, as far as the agent can tell. */
let service: LoopbackListener;
let scratch: string;
let refusing: Harness;
let allowing: Harness;

const pipelineYaml = (name: string, hosts: string): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, retries: 0 }\n` +
  `stages:\n  - id: call\n    prompt: Call home.\n    allowedTools: [Bash]\n    sandbox: { allowedDomains: [${hosts}] }\n`;

beforeAll(async () => {
  service = await listenOnLoopback('worker-host-service\n');
  scratch = await mkdtemp(path.join(tmpdir(), 'sandbox-local-hosts-'));
  // Through the sandbox's proxy (NO_PROXY cleared: the sandbox lists loopback there, which would skip the proxy).
  const command = `NO_PROXY= no_proxy= curl -s -m 5 http://localhost:${service.port}/by-name; NO_PROXY= no_proxy= curl -s -m 5 http://127.0.0.1:${service.port}/by-address`;
  const scenario = { rules: [{ name: 'call', match: 'Pipeline: local-', turns: [{ tool: { name: 'Bash', input: { command } } }, { text: REPORT }] }] };
  refusing = await createHarness('local-hosts-refused', { scenario });
  allowing = await createHarness('local-hosts-allowed', { scenario, env: { AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1' } });
});
afterAll(async () => {
  await refusing?.close();
  await allowing?.close();
  await service?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('loopback and link-local hosts in a pipeline\'s sandbox.allowedDomains', () => {
  test('are refused by validate and start, naming the field and the value, in every spelling of loopback', { timeout: 120_000 }, async () => {
    const file = path.join(scratch, 'local.yaml');
    await writeFile(file, pipelineYaml('local-cli', 'localhost, "127.1", "0x7f.0.0.1", "[::ffff:127.0.0.1]", 169.254.169.254, metadata.google.internal, github.com'));
    const env = { ...refusing.env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '' };
    const validated = await runCli(['validate', file], env);
    expect(validated.exitCode, validated.all).toBe(2);
    for (const [i, host] of ['localhost', '127.1', '0x7f.0.0.1', '[::ffff:127.0.0.1]', '169.254.169.254', 'metadata.google.internal'].entries()) {
      expect(validated.all).toContain(`stages[0].sandbox.allowedDomains[${i}]: "${host}" is `);
    }
    expect(validated.all).not.toContain('allowedDomains[6]');
    expect(validated.all).toContain('AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1');
    const started = await runCli(['start', file, '--id', `local-cli-${Date.now()}`], env);
    expect(started.exitCode, started.all).toBe(2);
    expect(started.all).toContain('stages[0].sandbox.allowedDomains[0]: "localhost" is a name of this machine');
    // With the setting, the client accepts what such workers run.
    expect((await runCli(['validate', file], { ...env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1' })).exitCode).toBe(0);
    expect(service.hits).toEqual([]);
  });

  test('fail a run started without our client at its input check, before any agent runs', { timeout: 120_000 }, async () => {
    const handle = await refusing.startYaml('local-raw', pipelineYaml('local-raw', 'localhost, 127.0.0.1'));
    const outcome = await handle.result().then(() => 'completed', (err: unknown) => err);
    expect(outcome).toBeInstanceOf(WorkflowFailedError);
    const cause = (outcome as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('PIPELINE_INVALID');
    expect(cause.message).toContain('pipeline.stages[0].sandbox.allowedDomains[0]: "localhost" is a name of this machine');
    expect(cause.message).toContain('pipeline.stages[0].sandbox.allowedDomains[1]: "127.0.0.1" is a loopback address');
    expect(refusing.modelServer.requests()).toEqual([]);
    expect(service.hits).toEqual([]);
  });

  test.skipIf(missing.length > 0)('reach the host through the sandbox only on a worker whose operator set AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1', { timeout: 180_000 }, async () => {
    const state = await allowing.finish(await allowing.startYaml('local-allowed', pipelineYaml('local-allowed', 'localhost, 127.0.0.1')));
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(stageOf(state, 'call'))).toBe('completed');
    expect(service.hits.sort()).toEqual(['/by-address', '/by-name']);
  });
});

/*
 * An HTTP or SSE server in `mcpServers` is reached by Claude Code itself, outside the sandbox, with the worker's network:
 * a `url` on this machine or the cloud's metadata service is refused under the same setting, by validate and, for a
 * run started without our client, by the worker before the agent starts.
 */
const mcpYaml = (name: string, url: string): string =>
  `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, retries: 0 }\n` +
  `mcpServers: { home: { type: http, url: "${url}" } }\n` +
  `stages:\n  - id: call\n    prompt: Call home.\n    mcpServers: { meta: { type: sse, url: "http://169.254.169.254/latest/" }, fine: { type: http, url: "https://mcp.example.com/x" } }\n`;
const mcpHits = (): string[] => service.hits.filter((hit) => hit.startsWith('/mcp'));

describe("loopback and link-local hosts in a pipeline's mcpServers urls", () => {
  test('are refused by validate, naming each server\'s url and the setting', { timeout: 120_000 }, async () => {
    const file = path.join(scratch, 'local-mcp.yaml');
    await writeFile(file, mcpYaml('local-mcp-cli', 'http://0x7f.1:1/mcp'));
    const env = { ...refusing.env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '' };
    const validated = await runCli(['validate', file], env);
    expect(validated.exitCode, validated.all).toBe(2);
    expect(validated.all).toContain('mcpServers.home.url: "127.0.0.1" is a loopback address');
    expect(validated.all).toContain('stages[0].mcpServers.meta.url: "169.254.169.254" is a link-local address');
    expect(validated.all).toContain('Claude Code (outside the sandbox) would send MCP requests to');
    expect(validated.all).not.toContain('mcpServers.fine');
    expect((await runCli(['validate', file], { ...env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1' })).exitCode).toBe(0);
  });

  test('fail the stage of a run started without our client before Claude Code connects to them', { timeout: 120_000 }, async () => {
    const handle = await refusing.startYaml('local-mcp-raw', mcpYaml('local-mcp-raw', `http://localhost:${service.port}/mcp-refused`));
    const state = await refusing.finish(handle);
    expectNoStageLeftRunning(state);
    const call = stageOf(state, 'call');
    expect(state.status).toBe('failed');
    expect(call.error?.type, JSON.stringify(call)).toBe('CONFIG_INVALID');
    expect(call.error?.message).toContain('the url of MCP servers "home", "meta" names "localhost" (a name of this machine (loopback))');
    expect(call.error?.message).toContain('AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1');
    expect(mcpHits()).toEqual([]);
  });

  test.skipIf(missing.length > 0)('are connected to on a worker whose operator set AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1', { timeout: 180_000 }, async () => {
    const state = await allowing.finish(await allowing.startYaml('local-mcp-allowed', mcpYaml('local-mcp-allowed', `http://127.0.0.1:${service.port}/mcp-allowed`)));
    expectNoStageLeftRunning(state);
    expect(mcpHits()).toContain('/mcp-allowed');
  });
});
