import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { mergeAgentSettings, prepareAgentSettings } from '../../src/activities/backends/claude-cli/agent-settings.js';
import { decideSandbox } from '../../src/activities/backends/claude-cli/sandbox-decision.js';
import { missingSandboxPackages, probeSandbox, sandboxHostChecker, type SandboxHost } from '../../src/activities/backends/claude-cli/sandbox-host.js';
import { describeSandboxMode, sandboxModeFromEnv } from '../../src/activities/backends/claude-cli/sandbox-mode.js';
import type { AgentReadScope } from '../../src/activities/backends/claude-cli/agent-reads.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { stageMayUseBash } from '../../src/pipeline/stage-tools.js';
import type { StageDefinition } from '../../src/pipeline/stage-schema.js';
import { resolveStage, type ResolvedStage } from '../../src/pipeline/stage-options.js';

const stageOf = (definition: Partial<StageDefinition>): ResolvedStage => {
  const full: StageDefinition = { id: 'work', prompt: 'x', ...definition };
  return resolveStage({ name: 'p', stages: [full] }, full);
};
const BASH = { allowedTools: ['Read', 'Bash'] };
/** Where an attempt whose bookkeeping is `stageDir` works: a run folder in the test's folder. */
const scopeIn = (stageDir: string): AgentReadScope => ({
  workspaceDir: path.join(scratch, 'run'),
  addDirs: [],
  workspacesRoot: scratch,
  claudeConfigDir: path.join(scratch, 'run', '.agent-pipeline', 'claude'),
  stageDir,
});
const READY = { missing: [] };
/** This host's missing sandbox packages: the real probe is checked only where they are installed. */
const missing = await missingSandboxPackages(process.env);

let scratch: string;
let noSandboxPath: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-settings-'));
  // A PATH with bwrap but without socat.
  noSandboxPath = path.join(scratch, 'bin');
  await mkdir(noSandboxPath);
  await writeFile(path.join(noSandboxPath, 'bwrap'), '#!/bin/sh\n', { mode: 0o755 });
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('AGENT_PIPELINE_SANDBOX', () => {
  test('is required, permissive, auto or off, required by default; anything else names the variable and the choices', () => {
    expect(sandboxModeFromEnv({})).toBe('required');
    expect(sandboxModeFromEnv({}, 'auto')).toBe('auto');
    expect(sandboxModeFromEnv({ AGENT_PIPELINE_SANDBOX: ' Required ' })).toBe('required');
    expect(sandboxModeFromEnv({ AGENT_PIPELINE_SANDBOX: 'permissive' }, 'auto')).toBe('permissive');
    expect(() => sandboxModeFromEnv({ AGENT_PIPELINE_SANDBOX: 'yes' })).toThrow('AGENT_PIPELINE_SANDBOX=yes is not one of required, permissive, auto, off; unset it for the default (required)');
  });

  test('is stated in the start-up line, with whether pipelines may switch the sandbox off', () => {
    expect(describeSandboxMode('required', false)).toContain("`sandbox: false` is refused");
    expect(describeSandboxMode('permissive', false)).toContain('pipelines MAY SWITCH IT OFF with `sandbox: false` (in any run');
    expect(describeSandboxMode('permissive', true)).toContain('(in signed runs only)');
    expect(describeSandboxMode('auto', false)).toMatch(/^auto \(the operator's choice\).*WITHOUT the sandbox where it cannot/);
    expect(describeSandboxMode('off', false)).toContain('WITHOUT');
  });
});

describe('the pipeline field `sandbox`', () => {
  test('takes true, false or options with host names, and refuses a URL as a host', () => {
    const ok = parsePipeline('name: p\ndefaults: { sandbox: { allowedDomains: [github.com, "*.npmjs.org"] } }\nstages:\n  - { id: a, prompt: x, sandbox: false }\n', 'p.yaml');
    expect(ok.defaults?.sandbox).toEqual({ allowedDomains: ['github.com', '*.npmjs.org'] });
    expect(() => parsePipeline('name: p\nstages:\n  - { id: a, prompt: x, sandbox: { allowedDomains: ["https://github.com/x"] } }\n', 'p.yaml')).toThrow(/allowedDomains/);
  });
});

describe('which stages are sandboxed', () => {
  test('by default every stage that may run Bash, and no other', () => {
    expect(stageMayUseBash(stageOf(BASH))).toBe(true);
    expect(stageMayUseBash(stageOf({ allowedTools: ['Bash(git status:*)'] }))).toBe(true);
    expect(stageMayUseBash(stageOf({ permissionMode: 'acceptEdits' }))).toBe(true);
    expect(stageMayUseBash(stageOf({ allowedTools: ['Read', 'Edit'] }))).toBe(false);
    expect(stageMayUseBash(stageOf({ permissionMode: 'acceptEdits', disallowedTools: ['Bash'] }))).toBe(false);
    expect(decideSandbox(stageOf(BASH), 'auto', READY).enabled).toBe(true);
    expect(decideSandbox(stageOf({ allowedTools: ['Read'] }), 'auto', READY).enabled).toBe(false);
  });

  test('`required` fails a Bash stage without the packages; `auto` warns and goes on', () => {
    expect(decideSandbox(stageOf(BASH), 'required', { missing: ['socat'] }).unavailable).toEqual({ reason: 'socat is not installed on the worker', missing: ['socat'] });
    const refused = { missing: [], refused: 'bwrap: setting up uid map: Permission denied' };
    expect(decideSandbox(stageOf(BASH), 'required', refused).unavailable?.reason).toContain('cannot create the sandbox\'s namespaces on the worker (bwrap: setting up uid map');
    expect(decideSandbox(stageOf(BASH), 'permissive', refused).unavailable).toBeDefined();
    // A stage that cannot run Bash is not slowed by a sandbox it has no use for, unless it asks; nor failed for the host.
    expect(decideSandbox(stageOf({ allowedTools: ['Read'] }), 'required', READY).enabled).toBe(false);
    expect(decideSandbox(stageOf({ allowedTools: ['Read'], sandbox: true }), 'required', READY).enabled).toBe(true);
    expect(decideSandbox(stageOf({ allowedTools: ['Read'] }), 'required', { missing: ['socat'] })).toEqual({ enabled: false, warnings: [] });
    const auto = decideSandbox(stageOf(BASH), 'auto', { missing: ['bubblewrap', 'socat'] });
    expect(auto.enabled).toBe(false);
    expect(auto.warnings[0]).toContain('WITHOUT');
    expect(auto.warnings[0]).toContain('apt-get install -y bubblewrap socat');
    expect(decideSandbox(stageOf(BASH), 'auto', refused)).toMatchObject({ enabled: false, warnings: [expect.stringContaining('docs/deployment.md')] });
  });

  test("a Bash stage's `sandbox: false` is refused unless the worker is `permissive`, and there only in signed runs when it requires them", () => {
    const optedOut = stageOf({ ...BASH, sandbox: false });
    for (const mode of ['required', 'auto'] as const) {
      const decision = decideSandbox(optedOut, mode, READY);
      expect(decision.refused?.message).toContain(`its \`sandbox: false\` (the stage's, or the pipeline's \`defaults\`)`);
      expect(decision.refused?.message).toContain(`does not let pipelines switch its sandbox off (AGENT_PIPELINE_SANDBOX=${mode})`);
      expect(decision.refused?.hint).toContain('AGENT_PIPELINE_SANDBOX=permissive');
      // Whatever the host offers: the refusal is about who decides, not about what is installed.
      expect(decideSandbox(optedOut, mode, { missing: ['bubblewrap'] }).refused).toBeDefined();
    }
    expect(decideSandbox(stageOf({ ...BASH, sandbox: { enabled: false } }), 'required', READY).refused).toBeDefined();
    const honoured = decideSandbox(optedOut, 'permissive', READY);
    expect(honoured).toEqual({ enabled: false, warnings: [expect.stringContaining("ran WITHOUT Claude Code's sandbox: the stage says `sandbox: false` and the worker lets pipelines switch it off (AGENT_PIPELINE_SANDBOX=permissive)")] });
    const unsigned = decideSandbox(optedOut, 'permissive', READY, { required: true });
    expect(unsigned.refused?.message).toContain('honours it only in runs whose signature it verified when they started');
    expect(decideSandbox(optedOut, 'permissive', READY, { required: true, signedBy: 'ci' })).toMatchObject({ enabled: false, warnings: [expect.stringContaining('in a run signed by ci')] });
    // `off`: the operator switched it off for every agent; the stage says so.
    expect(decideSandbox(optedOut, 'off', READY)).toEqual({ enabled: false, warnings: [expect.stringContaining('AGENT_PIPELINE_SANDBOX=off')] });
    // A stage that cannot run Bash has nothing to switch off: its `sandbox: false` is neither refused nor warned about.
    expect(decideSandbox(stageOf({ allowedTools: ['Read'], sandbox: false }), 'required', READY)).toEqual({ enabled: false, warnings: [] });
  });

  test('missing packages are found on PATH, and only on Linux', async () => {
    expect(await missingSandboxPackages({ PATH: noSandboxPath }, 'linux')).toEqual(['socat']);
    expect(await missingSandboxPackages({ PATH: '' }, 'linux')).toEqual(['bubblewrap', 'socat']);
    expect(await missingSandboxPackages({ PATH: '' }, 'darwin')).toEqual([]);
  });
});

describe('the settings an attempt gets', () => {
  const operator = {
    apiKeyHelper: '/usr/local/bin/key',
    sandbox: {
      enabled: false,
      allowUnsandboxedCommands: true,
      autoAllowBashIfSandboxed: true,
      failIfUnavailable: false,
      excludedCommands: ['docker'],
      enableWeakerNestedSandbox: true,
      network: { allowedDomains: ['internal.example'] },
    },
  };

  test('merge the operator, then the pipeline, then what the worker enforces, which nothing below weakens', () => {
    const stage = stageOf({ ...BASH, sandbox: { allowedDomains: ['github.com'] } });
    const merged = mergeAgentSettings(operator, stage, decideSandbox(stage, 'required', READY), 'required');
    expect(merged).toEqual({
      apiKeyHelper: '/usr/local/bin/key',
      sandbox: {
        enabled: true,
        allowUnsandboxedCommands: false,
        autoAllowBashIfSandboxed: false,
        failIfUnavailable: true,
        network: { allowedDomains: ['internal.example', 'github.com'] },
        excludedCommands: [],
        enableWeakerNestedSandbox: false,
        enableWeakerNetworkIsolation: false,
        filesystem: { disabled: false },
      },
    });
  });

  test('let a pipeline ask for sandboxed Bash to be allowed without `allowedTools`, and otherwise keep the operator\'s settings', () => {
    const stage = stageOf({ ...BASH, sandbox: { autoAllowBash: true } });
    expect(mergeAgentSettings({}, stage, decideSandbox(stage, 'auto', READY), 'auto')).toMatchObject({ sandbox: { autoAllowBashIfSandboxed: true, failIfUnavailable: false } });
    expect(mergeAgentSettings(operator, stageOf(BASH), decideSandbox(stageOf(BASH), 'off', READY), 'off')).toBe(operator);
  });

  test('are one 0600 file per stage, never JSON on the command line, rewritten only when they change', async () => {
    const stageDir = path.join(scratch, 'stages', 'work');
    const env = { PATH: process.env.PATH, AGENT_PIPELINE_CLAUDE_SETTINGS: JSON.stringify(operator) };
    const first = await prepareAgentSettings(stageOf(BASH), env, scopeIn(stageDir), { mode: 'auto' });
    expect(first.file).toBe(path.join(stageDir, 'settings.json'));
    expect((await stat(first.file)).mode & 0o777).toBe(0o600);
    const written = JSON.parse(await readFile(first.file, 'utf8')) as typeof operator;
    expect(written.apiKeyHelper).toBe('/usr/local/bin/key');
    const before = (await stat(first.file)).mtimeMs;
    await new Promise((resolve) => setTimeout(resolve, 20));
    await prepareAgentSettings(stageOf(BASH), env, scopeIn(stageDir), { mode: 'auto' });
    expect((await stat(first.file)).mtimeMs).toBe(before);
  });

  test('fail a Bash stage with SANDBOX_UNAVAILABLE naming the packages when the worker requires the sandbox', async () => {
    const failure = await prepareAgentSettings(stageOf(BASH), { PATH: noSandboxPath }, scopeIn(path.join(scratch, 'stages', 'b')), { mode: 'required' }).catch((err: unknown) => err as Error & { type?: string });
    expect(failure).toMatchObject({ type: 'SANDBOX_UNAVAILABLE', nonRetryable: true });
    expect((failure as Error).message).toContain('socat is not installed');
    expect((failure as Error).message).toContain('apt-get install -y socat');
    // Packages there, namespaces refused (a container's defaults): failed too, pointing at the container settings.
    const refusedHost = async () => ({ missing: [], refused: 'bwrap: No permissions to creating new namespace' });
    const refused = await prepareAgentSettings(stageOf(BASH), process.env, scopeIn(path.join(scratch, 'stages', 'b')), { mode: 'required', host: refusedHost }).catch((err: unknown) => err as Error);
    expect(refused).toMatchObject({ type: 'SANDBOX_UNAVAILABLE' });
    expect((refused as Error).message).toContain('No permissions to creating new namespace');
    expect((refused as Error).message).toContain('docs/deployment.md');
  });

  test('fail a stage whose `sandbox: false` the worker does not allow with SANDBOX_OPT_OUT_REFUSED, writing no settings', async () => {
    const stageDir = path.join(scratch, 'stages', 'optout');
    const failure = await prepareAgentSettings(stageOf({ ...BASH, sandbox: false }), process.env, scopeIn(stageDir), { mode: 'required', host: async () => READY }).then(() => new Error('not refused'), (err: unknown) => err as Error);
    expect(failure).toMatchObject({ type: 'SANDBOX_OPT_OUT_REFUSED', nonRetryable: true });
    expect(failure.message).toMatch(/^\[SANDBOX_OPT_OUT_REFUSED\] stage work: its `sandbox: false`/);
    await expect(stat(path.join(stageDir, 'settings.json'))).rejects.toThrow();
    // `permissive` writes settings that switch the sandbox off, and says so.
    const honoured = await prepareAgentSettings(stageOf({ ...BASH, sandbox: false }), { PATH: process.env.PATH, AGENT_PIPELINE_CLAUDE_SETTINGS: JSON.stringify(operator) }, scopeIn(stageDir), { mode: 'permissive', host: async () => READY });
    expect(JSON.parse(await readFile(honoured.file, 'utf8'))).toMatchObject({ sandbox: { enabled: false } });
    expect(honoured.sandbox.warnings).toEqual([expect.stringContaining('WITHOUT')]);
  });

  test('name the variable when the operator\'s settings are not JSON', async () => {
    const failure = await prepareAgentSettings(stageOf(BASH), { PATH: process.env.PATH, AGENT_PIPELINE_CLAUDE_SETTINGS: '{ nope' }, scopeIn(path.join(scratch, 'stages', 'c')), { mode: 'auto' }).catch((err: unknown) => err as Error & { type?: string });
    expect(failure).toMatchObject({ type: 'CONFIG_INVALID' });
    expect((failure as Error).message).toContain('AGENT_PIPELINE_CLAUDE_SETTINGS: cannot read its inline JSON');
  });
});

describe('validate', () => {
  test('notes a CLI stage whose sandboxed Bash runs with no word on its network, and no other', async () => {
    const { validatePipeline } = await import('../../src/library/validate-pipeline.js');
    const report = await validatePipeline(
      {
        name: 'net',
        stages: [
          { id: 'build', prompt: 'Do the work.', allowedTools: ['Bash'] },
          { id: 'fetch', prompt: 'Do the work.', allowedTools: ['Bash'], sandbox: { allowedDomains: ['registry.npmjs.org'] } },
          { id: 'offline', prompt: 'Do the work.', allowedTools: ['Bash'], sandbox: true },
          { id: 'read', prompt: 'Do the work.', allowedTools: ['Read'] },
          { id: 'api', prompt: 'Do the work.', backend: 'anthropic-api' },
        ],
      },
      { baseDir: scratch },
    );
    expect(report.problems).toEqual([]);
    const sandboxNotes = report.notes.filter((n) => n.message.includes('sandbox'));
    expect(sandboxNotes.map((n) => n.field)).toEqual(['stages[0].allowedTools']);
    expect(sandboxNotes[0].message).toContain('allowedDomains');
  });
});

describe('validate, for a stage that asks to go unsandboxed', () => {
  test('notes which workers run it, on its `sandbox` field or (from `defaults`) its id; a stage without Bash gets nothing', async () => {
    const { validatePipeline } = await import('../../src/library/validate-pipeline.js');
    const report = await validatePipeline(
      {
        name: 'off',
        defaults: { sandbox: false },
        stages: [
          { id: 'sync', prompt: 'Do the work.', allowedTools: ['Bash'], sandbox: { enabled: false } },
          { id: 'also', prompt: 'Do the work.', allowedTools: ['Bash'] },
          { id: 'read', prompt: 'Do the work.', allowedTools: ['Read'] },
        ],
      },
      { baseDir: scratch },
    );
    const notes = report.notes.filter((n) => n.message.includes('SANDBOX_OPT_OUT_REFUSED'));
    expect(notes.map((n) => n.field)).toEqual(['stages[0].sandbox', 'stages[1].id']);
    expect(notes[0].message).toContain('AGENT_PIPELINE_SANDBOX=permissive');
  });
});

describe("a worker's view of its host", () => {
  test('believes a host that can sandbox for good, and checks one that cannot again once its answer is old', async () => {
    let clock = 0;
    let installed = false;
    const checks: number[] = [];
    const check = async (): Promise<SandboxHost> => {
      checks.push(clock);
      return installed ? { missing: [] } : { missing: ['bubblewrap'] };
    };
    const host = sandboxHostChecker({}, { recheckMs: 5_000, check, now: () => clock });
    expect(await host()).toEqual({ missing: ['bubblewrap'] });
    // Callers at the same time share one check; a recent negative answer stands.
    await Promise.all([host(), host()]);
    clock = 4_999;
    expect(await host()).toEqual({ missing: ['bubblewrap'] });
    expect(checks).toEqual([0]);
    // Installed while the worker runs: the next caller after the recheck time sees it.
    installed = true;
    clock = 5_000;
    expect(await host()).toEqual({ missing: [] });
    installed = false;
    clock = 1_000_000;
    expect(await host()).toEqual({ missing: [] });
    expect(checks).toEqual([0, 5_000]);
  });

  test('checks again after a check that failed', async () => {
    let calls = 0;
    const host = sandboxHostChecker({}, { recheckMs: 60_000, check: async () => (++calls === 1 ? Promise.reject(new Error('boom')) : { missing: [] }) });
    await expect(host()).rejects.toThrow('boom');
    expect(await host()).toEqual({ missing: [] });
  });
});

describe('the start-up probe', () => {
  test('finds bubblewrap able to make its namespaces here, and says why not when it cannot run', async () => {
    expect(await probeSandbox({ PATH: '' }, 'linux')).toBe('bubblewrap is not installed');
    // A bwrap that fails stands for a host that refuses user namespaces.
    await writeFile(path.join(noSandboxPath, 'bwrap'), '#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n', { mode: 0o755 });
    expect(await probeSandbox({ PATH: noSandboxPath }, 'linux')).toBe('bwrap: setting up uid map: Permission denied');
    if (missing.length === 0) expect(await probeSandbox(process.env)).toBeUndefined();
  });
});

describe('loopback and link-local hosts in `sandbox.allowedDomains`', () => {
  const REFUSED = [
    'localhost', 'LOCALHOST.', 'ui.localhost', '*.localhost', 'localhost.localdomain', 'ip6-localhost',
    '127.0.0.1', '127.1', '0x7f.0.0.1', '0177.0.0.1', '2130706433', '0x7f000001', '127.255.255.254', '0.0.0.0', '0',
    '::1', '[::1]', '::', '0:0:0:0:0:0:0:1', '[::ffff:127.0.0.1]', '::ffff:7f00:1', '::127.0.0.1', '64:ff9b::7f00:1',
    '169.254.169.254', '169.254.0.1', '0xa9.0xfe.0xa9.0xfe', 'fe80::1', '[fe80::abcd]', '::ffff:169.254.169.254', 'fd00:ec2::254', '100.100.100.200',
    'metadata.google.internal', '*.google.internal', '*.internal', 'metadata', 'instance-data', 'metadata.goog',
    // Names without a domain resolve on the worker's own network: compose's services.
    'temporal', 'codec-server',
  ];
  const ACCEPTED = ['github.com', '*.npmjs.org', 'registry.npmjs.org', '140.82.112.3', '10.0.0.5', '2001:db8::1', '128.0.0.1', '169.255.0.1', '127.example.com', '0x7f.example.com', '*.githubusercontent.com'];

  test('are recognised in every spelling the sandbox would dial, and real hosts are not', async () => {
    const { describeLocalHost } = await import('../../src/pipeline/local-hosts.js');
    for (const host of REFUSED) expect(describeLocalHost(host), host).toBeDefined();
    for (const host of ACCEPTED) expect(describeLocalHost(host), host).toBeUndefined();
  });

  test('are refused by validate (and so start) naming the field and the value, unless AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL allows them', async () => {
    const { validatePipeline } = await import('../../src/library/validate-pipeline.js');
    const definition = {
      name: 'loopback',
      defaults: { sandbox: { allowedDomains: ['169.254.169.254'] } },
      stages: [{ id: 'probe', prompt: 'Probe.', allowedTools: ['Bash'], sandbox: { allowedDomains: ['github.com', '0x7f.0.0.1'] } }],
    };
    const refused = await validatePipeline(definition, { baseDir: scratch, allowLocalHosts: false });
    expect(refused.problems.map((p) => p.field)).toEqual(['defaults.sandbox.allowedDomains[0]', 'stages[0].sandbox.allowedDomains[1]']);
    expect(refused.problems[1]!.message).toMatch(/^"0x7f\.0\.0\.1" is a loopback address .*AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1/);
    expect((await validatePipeline(definition, { baseDir: scratch, allowLocalHosts: true })).problems).toEqual([]);
  });

  test("are refused by the worker's check of a run's input (a raw start skips validate), unless it allows them", async () => {
    const { findRunInputProblems, RUN_INPUT_VERSION } = await import('../../src/pipeline/run-input.js');
    const input = { version: RUN_INPUT_VERSION, baseDir: '/p', pipelineFile: 'p.yaml', inputs: {}, pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'x', sandbox: { allowedDomains: ['[::ffff:127.0.0.1]'] } }] } };
    expect(findRunInputProblems(input)).toEqual([{ path: 'pipeline.stages[0].sandbox.allowedDomains[0]', message: expect.stringContaining('"[::ffff:127.0.0.1]" is a loopback address') }]);
    expect(findRunInputProblems(input, { allowLocalHosts: true })).toEqual([]);
  });

  test('fail the stage on the worker with CONFIG_INVALID naming the host and the setting; allowed, the settings list it', async () => {
    const stage = stageOf({ ...BASH, sandbox: { allowedDomains: ['localhost'] } });
    const env = { PATH: process.env.PATH };
    const failure = await prepareAgentSettings(stage, env, scopeIn(path.join(scratch, 'stages', 'local')), { mode: 'auto' }).catch((err: unknown) => err as Error & { type?: string });
    expect(failure).toMatchObject({ type: 'CONFIG_INVALID', nonRetryable: true });
    expect((failure as Error).message).toMatch(/sandbox\.allowedDomains names "localhost" .*AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=1/);
    const allowed = await prepareAgentSettings(stage, { ...env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: '1' }, scopeIn(path.join(scratch, 'stages', 'local')), { mode: 'auto', host: async () => READY });
    expect(JSON.parse(await readFile(allowed.file, 'utf8'))).toMatchObject({ sandbox: { network: { allowedDomains: ['localhost'] } } });
    await expect(prepareAgentSettings(stage, { ...env, AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: 'yes' }, scopeIn(path.join(scratch, 'stages', 'local')), { mode: 'auto' })).rejects.toThrow(
      /AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL=yes is not 1 or 0/,
    );
  });
});

describe('what an agent may read', () => {
  const home = '/home/worker';
  const settingsFor = async (env: NodeJS.ProcessEnv, scope: AgentReadScope = scopeIn(path.join(scratch, 'run', '.agent-pipeline', 'stages', 'r'))) => {
    const written = await prepareAgentSettings(stageOf(BASH), { PATH: process.env.PATH, ...env }, scope, { mode: 'auto', host: async () => READY });
    return JSON.parse(await readFile(written.file, 'utf8')) as { permissions: { deny: string[]; blockFileToolReadsOutsideWorkingDirectories: boolean }; sandbox: { filesystem: { denyRead: string[]; allowRead: string[] } } };
  };

  test("keeps the file tools to the working folders and out of the worker's home, its credentials, other runs and the run's bookkeeping", async () => {
    const settings = await settingsFor({
      HOME: home,
      TEMPORAL_TLS_CLIENT_KEY_PATH: '/etc/temporal/client.key',
      AGENT_PIPELINE_SIGNING_KEY_FILE: '/etc/agent-pipeline/signing.key',
      AGENT_PIPELINE_CLAUDE_SETTINGS: JSON.stringify({ permissions: { deny: ['Bash(rm:*)'] } }),
    });
    const { deny, blockFileToolReadsOutsideWorkingDirectories } = settings.permissions;
    expect(blockFileToolReadsOutsideWorkingDirectories).toBe(true);
    expect(deny).toEqual(expect.arrayContaining([
      'Bash(rm:*)',
      `Read(/${home}/**)`, `Read(/${home}/.ssh/**)`, `Read(/${home}/.config/gh/**)`, `Read(/${home}/.claude.json)`,
      'Read(//etc/temporal/client.key)', 'Read(//etc/agent-pipeline/signing.key)',
      `Read(/${path.join(scratch, 'run', '.agent-pipeline', 'claude', '.credentials.json')})`,
      `Read(/${path.join(scratch, 'run', '.agent-pipeline', 'stages')}/**)`,
    ]));
    // The workspaces root holds the agent's own folder: a deny rule would shut it out of its own work. The block on
    // reads outside the working folders keeps the file tools out of the other runs instead.
    expect(deny.filter((rule) => rule.startsWith(`Read(/${scratch})`) || rule.startsWith(`Read(/${scratch}/**)`))).toEqual([]);
    // Bash: the same folders hidden by the sandbox, the working folder let back through.
    expect(settings.sandbox.filesystem.denyRead).toEqual(expect.arrayContaining([home, `${home}/.ssh`, scratch, '/etc/temporal/client.key']));
    expect(settings.sandbox.filesystem.allowRead).toEqual([path.join(scratch, 'run')]);
  });

  test('writes no deny rule over a home that holds the workspaces, nor denies a home of /', async () => {
    const held = await settingsFor({ HOME: path.dirname(scratch) });
    expect(held.permissions.deny).not.toContain(`Read(/${path.dirname(scratch)}/**)`);
    expect(held.permissions.deny).toContain(`Read(/${path.dirname(scratch)}/.ssh/**)`);
    expect(held.sandbox.filesystem.denyRead).toContain(path.dirname(scratch));
    const root = await settingsFor({ HOME: '/' });
    expect(root.sandbox.filesystem.denyRead).not.toContain('/');
    expect(root.permissions.deny).toContain('Read(//.ssh/**)');
  });
});
