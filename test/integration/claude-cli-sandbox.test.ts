import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { listenOnLoopback, listenOnSocketFile, type LoopbackListener } from '../helpers/loopback-listener.js';
import { MISSING_SANDBOX_PACKAGES, pathWithout, type HiddenPrograms } from '../helpers/sandbox-host.js';
import { BUBBLEWRAP, SOCAT } from '../helpers/system-package.js';
import { createCliWorld, failureOf, REPORT, type CliWorld } from './claude-cli-world.js';
import { CLI } from './cli-helpers.js';
import { waitForWorkerPolling } from './worker-health.js';
import { expectNoStageLeftRunning, stageOf } from './workflow-helpers.js';

/*
 * Issue 19, reproduction 3: an agent's Bash read the worker's secrets from /proc/<worker>/environ, wrote anywhere the
 * worker's user may, and reached any port. With the real `claude`, a real worker process holding secrets in its
 * environment and the real bubblewrap: the scripted agent searches every /proc/*\/environ it can see, writes outside
 * its workspace, calls a port it was not allowed and a service on a unix-domain socket of the host, then does its
 * allowed work. Sandboxed, all four fail and the stage completes; with AGENT_PIPELINE_SANDBOX=off the same probe finds
 * the secrets and reaches both services, which proves the probe works.
 */

const missing = MISSING_SANDBOX_PACKAGES;
if (missing.length > 0) {
  // One plain line, so a developer's `npm test` says what it left out and how to get it (CI installs them).
  process.stderr.write(`skipped: the sandbox probe of test/integration/claude-cli-sandbox.test.ts needs ${missing.join(' and ')} (not on PATH): install with \`sudo apt-get install -y ${missing.join(' ')}\`\n`);
}

/** Secrets the worker holds and never gives its agents. */
const GH_TOKEN = 'ghp_sandbox-probe-5d7e1f3a9b';
const DB_PASSWORD = 'db-password-sandbox-2c8e4a6f';
/** Written reversed in the command, so the probe's own processes do not carry them in their arguments or environment. */
const reversed = (value: string): string => [...value].reverse().join('');

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

let harness: Harness;
let scratch: string;
let outside: string;
let forbidden: LoopbackListener;
let allowed: LoopbackListener;
/** A service on a unix-domain socket the agent can see, as the Docker daemon's or an SSH agent's is. */
let socketFile: LoopbackListener;
let socketPath: string;

function probeCommand(): string {
  return [
    `S1=$(printf %s '${reversed(GH_TOKEN)}' | rev); S2=$(printf %s '${reversed(DB_PASSWORD)}' | rev); n=0`,
    // Every environ this process can see: in its own PID namespace /proc/$PPID is not the worker, so all of them.
    'for f in /proc/[0-9]*/environ; do n=$((n+1)); if grep -qaF -e "$S1" -e "$S2" "$f" 2>/dev/null; then echo "FOUND-SECRET $f"; fi; done',
    'echo "scanned $n"',
    `(echo escaped > '${outside}/escape.txt') 2>/dev/null && echo WROTE-OUTSIDE`,
    `curl -s -m 5 --noproxy '*' http://127.0.0.1:${forbidden.port}/direct && echo REACHED-DIRECT`,
    `NO_PROXY= no_proxy= curl -s -m 5 -o /dev/null -w 'proxied %{http_code}\\n' http://127.0.0.1:${forbidden.port}/proxied`,
    `NO_PROXY= no_proxy= curl -s -m 5 http://localhost:${allowed.port}/allowed`,
    `curl -s -m 5 --unix-socket '${socketPath}' http://host/unix && echo REACHED-UNIX-SOCKET`,
    'echo "allowed work" > inside.txt && echo WROTE-INSIDE',
  ].join('; ');
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'claude-cli-sandbox-'));
  outside = await mkdtemp(path.join(tmpdir(), 'claude-cli-sandbox-outside-'));
  forbidden = await listenOnLoopback('reached\n');
  allowed = await listenOnLoopback('reached\n');
  socketPath = path.join(scratch, 'host.sock');
  socketFile = await listenOnSocketFile(socketPath, 'reached\n');
  harness = await createHarness('claude-cli-sandbox', {
    worker: false,
    scenario: {
      rules: [{ name: 'probe', match: 'Pipeline: probe-', turns: [{ tool: { name: 'Bash', input: { command: probeCommand() } } }, { text: report('Probed.') }] }],
    },
  });
});
afterAll(async () => {
  await harness?.close();
  await Promise.all([forbidden?.close(), allowed?.close(), socketFile?.close()]);
  for (const dir of [scratch, outside]) if (dir) await rm(dir, { recursive: true, force: true });
});

/** Runs the probe pipeline on a worker process of its own, with the worker's secrets and the given sandbox mode. */
async function runProbe(mode: 'required' | 'off'): Promise<{ output: string; workspace: string; summary?: string }> {
  const env = {
    ...harness.env,
    GH_TOKEN,
    WORKER_DB_PASSWORD: DB_PASSWORD,
    AGENT_PIPELINE_SANDBOX: mode,
    // The allowed host the probe reaches is a listener on this machine, which pipelines may list only with this setting.
    AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1',
    AGENT_PIPELINE_HEALTH_FILE: path.join(scratch, `worker-${mode}.health`),
  };
  const worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore' });
  try {
    await waitForWorkerPolling(env, 60_000, `the ${mode} worker`);
    const yaml =
      `name: probe-${mode}\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, stallTimeout: 2m, retries: 0 }\n` +
      `stages:\n  - id: probe\n    prompt: Probe.\n    allowedTools: [Bash]\n    sandbox: { allowedDomains: [localhost] }\n`;
    const state = await harness.finish(await harness.startYaml(`probe-${mode}`, yaml));
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(stageOf(state, 'probe'))).toBe('completed');
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'probe');
    const last = (requests.at(-1)!.body as { messages: { content: unknown }[] }).messages.at(-1);
    return { output: JSON.stringify(last), workspace: state.workspace!, summary: stageOf(state, 'probe').result?.summary };
  } finally {
    worker.kill('SIGTERM');
    await worker;
  }
}

describe("Claude Code's sandbox around an agent's Bash", () => {
  test.skipIf(missing.length > 0)(
    'keeps the worker\'s secrets, the host\'s files and unlisted ports from the agent, and the stage completes its allowed work',
    { timeout: 240_000 },
    async () => {
      const { output, workspace, summary } = await runProbe('required');
      // The probe ran: it scanned what it could see, and did its allowed work.
      expect(output).toMatch(/scanned [1-9]/);
      expect(output).toContain('WROTE-INSIDE');
      expect(await readFile(path.join(workspace, 'inside.txt'), 'utf8')).toBe('allowed work\n');
      expect(summary).toBe('Probed.');
      // And every escape failed.
      expect(output).not.toContain('FOUND-SECRET');
      expect(output).not.toContain(GH_TOKEN);
      expect(output).not.toContain('WROTE-OUTSIDE');
      expect(existsSync(path.join(outside, 'escape.txt'))).toBe(false);
      expect(output).not.toContain('REACHED-DIRECT');
      expect(output).toContain('proxied 403');
      expect(forbidden.hits).toEqual([]);
      // No unix-domain socket either: the sandbox's seccomp filter refuses to make one.
      expect(output).not.toContain('REACHED-UNIX-SOCKET');
      expect(socketFile.hits).toEqual([]);
      // The host the pipeline allowed was reached through the sandbox's proxy.
      expect(allowed.hits).toEqual(['/allowed']);
    },
  );

  test('is what stops the probe: with AGENT_PIPELINE_SANDBOX=off the same agent reads the secrets and escapes', { timeout: 240_000 }, async () => {
    forbidden.hits.length = 0;
    const { output } = await runProbe('off');
    expect(output).toContain('FOUND-SECRET');
    expect(output).toContain('WROTE-OUTSIDE');
    expect(existsSync(path.join(outside, 'escape.txt'))).toBe(true);
    expect(forbidden.hits.length).toBeGreaterThan(0);
    expect(output).toContain('REACHED-UNIX-SOCKET');
  });
});

describe('a worker whose host lacks socat', () => {
  let world: CliWorld;
  let hidden: HiddenPrograms;
  let bin: string;
  /** What the worker must name: socat, and bubblewrap too on a host without it (any machine runs this). */
  let lacking: string[];
  let notInstalled: string;
  beforeAll(async () => {
    world = await createCliWorld({ rules: [{ name: 'work', match: 'Task: work', turns: [{ tool: { name: 'Bash', input: { command: 'echo ran > ran.txt' } } }, { text: REPORT }] }] });
    // Every program of this machine's PATH but socat (and so, to the sandbox, a host without it).
    hidden = await pathWithout(SOCAT.commands);
    bin = hidden.path;
    lacking = [BUBBLEWRAP, SOCAT].filter((pkg) => !pkg.locate({ PATH: bin })).map((pkg) => pkg.name);
    notInstalled = `${lacking.join(' and ')} ${lacking.length > 1 ? 'are' : 'is'} not installed on the worker`;
  });
  afterAll(async () => {
    await world?.close();
    await hidden?.remove();
  });

  test('fails a Bash stage with SANDBOX_UNAVAILABLE naming socat (and bubblewrap where it lacks that too) when it requires the sandbox, before any agent starts', async () => {
    const attempt = await world.start({ task: 'Task: work', env: { PATH: bin }, options: { sandbox: 'required' } });
    const failure = await failureOf(attempt.outcome);
    expect(failure).toMatchObject({ type: 'SANDBOX_UNAVAILABLE', nonRetryable: true });
    expect(lacking).toContain('socat');
    expect(failure.message).toContain(notInstalled);
    expect(failure.message).toContain(`apt-get install -y ${lacking.join(' ')}`);
    expect(existsSync(path.join(attempt.dir, 'ran.txt'))).toBe(false);
  });

  test('runs it unsandboxed with `auto`, and says so in the stage result', async () => {
    const attempt = await world.start({ task: 'Task: work', env: { PATH: bin }, options: { sandbox: 'auto' } });
    const outcome = await attempt.outcome;
    expect(outcome.warnings).toEqual([expect.stringContaining(`the agent's Bash ran WITHOUT Claude Code's sandbox: ${notInstalled}`)]);
    expect(await readFile(path.join(attempt.dir, 'ran.txt'), 'utf8')).toBe('ran\n');
  });
});
