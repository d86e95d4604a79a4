import { describe, expect, test } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { commandEnvironment, allowedCommandEnv, commandSecretValues, launcherEnvironment } from '../../src/activities/backends/command/command-env.js';
import { launchWithEnvFile } from '../../src/activities/backends/command/command-env-file.js';
import { runtimeConfig } from '../../src/activities/backends/claude-cli/command-sandbox.js';
import { commandArgv, describeCommand, signalOfExitCode } from '../../src/activities/backends/command/backend.js';
import { STAGE_MARKER, WORKER_MARKER } from '../../src/activities/process/sweep.js';
import { TranscriptFormatter } from '../../src/cli/transcript.js';
import { loadModelCatalog } from '../../src/activities/backends/models.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import { resolveStage, type ResolvedStage } from '../../src/pipeline/stage-options.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';
import { readCommandAnswer } from '../../src/activities/run-stage/command-answer.js';
import type { AttemptRecord } from '../../src/activities/run-stage/attempt-setup.js';

/* Command stages (issue 31): what `validate` refuses, how the stage resolves, its environment and its sandbox's settings. */

const file = (stage: string): string => `name: p\ninputs: { bead: { required: true } }\nstages:\n${stage}`;

describe('a command stage in the pipeline file', () => {
  test('refuses a template inside `run:`, naming the stage and the field, with `env:` as the fix', () => {
    expect(pipelineProblems(file('  - id: track\n    run: bd update {{inputs.bead}}\n'))).toEqual([
      expect.stringMatching(/^stages\[0\]\.run: stage "track": `run:` is literal text and may not hold a template \("bd update \{\{inputs\.bead\}\}"\).*`env: \{ BEAD: "\{\{inputs\.bead_id\}\}" \}`/),
    ]);
    expect(pipelineProblems(file('  - id: track\n    run: [bd, update, "{{inputs.bead}}"]\n'))[0]).toMatch(/^stages\[0\]\.run\[2\]: stage "track": `run:` is literal text/);
    expect(pipelineProblems(file('  - id: track\n    run: bd update "$BEAD"\n    env: { BEAD: "{{inputs.bead}}" }\n'))).toEqual([]);
  });

  test('refuses agent options on a command stage, and command options on an agent stage', () => {
    expect(pipelineProblems(file('  - id: t\n    run: npm test\n    model: opus\n    prompt: Test it.\n'))).toEqual([
      'stages[0].model: stage "t" runs a command (`run:`), which has no agent: `model` does not apply; remove it, or remove `run:` to run an agent',
      'stages[0].prompt: stage "t" runs a command (`run:`), which has no agent: `prompt` does not apply; remove it, or remove `run:` to run an agent',
    ]);
    expect(pipelineProblems(file('  - id: t\n    prompt: Test it.\n    passEnv: [GH_TOKEN]\n'))).toEqual([
      'stages[0].passEnv: `passEnv` belongs to a command stage; stage "t" has no `run:` (add the command, or remove `passEnv`)',
    ]);
    expect(pipelineProblems(file('  - id: t\n    run: "true"\n    env: { "bad name": x }\n'))[0]).toMatch(/^stages\[0\]\.env\.bad name: /);
  });

  test('resolves to the command backend with no model, whatever the defaults say, and is no approval gate', () => {
    const pipeline = parsePipeline('name: p\ndefaults: { backend: anthropic-api, model: opus }\nstages:\n  - id: t\n    run: [npm, test]\n    timeout: 2m\n', 'p.yaml');
    const stage = resolveStage(pipeline, pipeline.stages[0]!);
    expect(stage).toMatchObject({ backend: 'command', model: '', gateOnly: false, timeoutMs: 120_000, run: ['npm', 'test'] });
    expect(commandArgv(stage.run)).toEqual(['npm', 'test']);
    expect(commandArgv('npm test')).toEqual(['/bin/sh', '-c', 'npm test']);
  });
});

describe("a command's environment", () => {
  const stage = { id: 't', env: { BEAD: 'b-1; touch pwned' }, passEnv: ['GH_TOKEN'] } as unknown as ResolvedStage;
  const worker = { PATH: '/usr/bin', HOME: '/home/worker', LANG: 'C.UTF-8', ANTHROPIC_API_KEY: 'sk-secret', GH_TOKEN: 'ghp_x', DEPLOY_TOKEN: 'dtk' };
  const place = { home: '/runs/r/home', markers: { stage: 's#1', worker: 'w' } };

  test('is the base variables, the run home, `env:` and the allowed `passEnv:` names, markers last', () => {
    expect(commandEnvironment(stage, worker, allowedCommandEnv({ AGENT_PIPELINE_COMMAND_ENV: ' GH_TOKEN , SSH_AUTH_SOCK' }), place)).toEqual({
      PATH: '/usr/bin',
      LANG: 'C.UTF-8',
      HOME: '/runs/r/home',
      BEAD: 'b-1; touch pwned',
      GH_TOKEN: 'ghp_x',
      [STAGE_MARKER]: 's#1',
      [WORKER_MARKER]: 'w',
    });
    const hiding = { ...stage, env: { [STAGE_MARKER]: 'elsewhere' }, passEnv: [] } as unknown as ResolvedStage;
    expect(commandEnvironment(hiding, worker, new Set(), place)[STAGE_MARKER]).toBe('s#1');
  });

  test('fails CONFIG_INVALID naming the variable and AGENT_PIPELINE_COMMAND_ENV for a name the worker does not allow', () => {
    expect(() => commandEnvironment(stage, worker, allowedCommandEnv({}), place)).toThrow(
      /\[CONFIG_INVALID\] stage t: `passEnv` names GH_TOKEN, which this worker does not pass to commands \(AGENT_PIPELINE_COMMAND_ENV=\(unset\)\).*add it to AGENT_PIPELINE_COMMAND_ENV/,
    );
  });
});

describe("what starts a sandboxed command outside the sandbox", () => {
  const stage = { id: 't', env: { NODE_OPTIONS: '--require ./evil.js', PATH: './bin', LD_PRELOAD: './evil.so' }, passEnv: ['GH_TOKEN'] } as unknown as ResolvedStage;
  const worker = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', GH_TOKEN: 'ghp_x', NODE_OPTIONS: '--max-old-space-size=4096' };
  const place = { home: '/runs/r/home', markers: { stage: 's#1', worker: 'w' } };

  test("gets only the worker's base variables, the run home and the markers: no `env:`, no `passEnv:`", () => {
    expect(launcherEnvironment(worker, place)).toEqual({ PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/runs/r/home', [STAGE_MARKER]: 's#1', [WORKER_MARKER]: 'w' });
  });

  test('hands the command its whole environment inside, byte for byte, from a file the loader removes', async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'command-env-file-'));
    try {
      const tricky = `it's "$(touch pwned)" \`x\` \\ $HOME\n; rm -rf /`;
      const env = { ...commandEnvironment(stage, worker, new Set(['GH_TOKEN']), place), TRICKY: tricky };
      const launch = await launchWithEnvFile(home, env, ['/bin/sh', '-c', 'printf "%s|%s|%s|%s" "$TRICKY" "$NODE_OPTIONS" "$GH_TOKEN" "$PATH"']);
      const { stdout } = await promisify(execFile)(launch.argv[0]!, launch.argv.slice(1), { cwd: home, env: launcherEnvironment(worker, place) });
      expect(stdout).toBe(`${tricky}|--require ./evil.js|ghp_x|./bin`);
      expect(await readdir(home)).toEqual([]);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe('a failed command in its message', () => {
  test('is the whole command: a string as written, a list as its words, quoted where a word needs it', () => {
    // The message named only the list's last word: `the command "--flag" exited with code 127`.
    expect(describeCommand(['no-such-tool', '--flag'])).toBe('no-such-tool --flag');
    expect(describeCommand(['sh', '-c', "echo it's"])).toBe(`sh -c 'echo it'\\''s'`);
    expect(describeCommand('npm test && echo "ok"')).toBe('npm test && echo "ok"');
  });

  test("says which signal a shell's exit code over 128 stands for: a sandboxed command runs under shells", () => {
    expect(signalOfExitCode(137)).toBe(' (128 + 9: killed by SIGKILL, perhaps out of memory)');
    expect(signalOfExitCode(143)).toBe(' (128 + 15: killed by SIGTERM)');
    for (const code of [1, 127, 128, 255, undefined]) expect(signalOfExitCode(code)).toBe('');
  });
});

describe('AGENT_PIPELINE_COMMAND_ENV', () => {
  test('never lets a signing or encryption key through, and what it lets through is redacted as a secret', () => {
    const env = { AGENT_PIPELINE_COMMAND_ENV: 'BEADS_DB_URL,AGENT_PIPELINE_SIGNING_KEY,AGENT_PIPELINE_ENCRYPTION_KEY', BEADS_DB_URL: 'postgres://beads:pw@db/beads', AGENT_PIPELINE_SIGNING_KEY: 'key' };
    expect([...allowedCommandEnv(env)]).toEqual(['BEADS_DB_URL']);
    expect(commandSecretValues(env)).toEqual(['postgres://beads:pw@db/beads']);
  });
});

describe("a command's sandbox settings", () => {
  test("are the merged settings' hosts and read limits, with the workspace and the command's home writable", () => {
    const sandbox = {
      enabled: true,
      network: { allowedDomains: ['registry.npmjs.org'] },
      filesystem: { denyRead: ['/home/worker', '/ws-root'], allowRead: ['/ws-root/run'], allowWrite: ['/srv/cache'] },
      allowUnsandboxedCommands: false,
    };
    expect(runtimeConfig(sandbox, ['/ws-root/run', '/ws-root/.agent-pipeline/runs/run/home'], '/bin/claude')).toEqual({
      network: { allowedDomains: ['registry.npmjs.org'], deniedDomains: [] },
      filesystem: {
        denyRead: ['/home/worker', '/ws-root'],
        allowRead: ['/ws-root/run', '/ws-root/.agent-pipeline/runs/run/home'],
        allowWrite: ['/ws-root/run', '/ws-root/.agent-pipeline/runs/run/home', '/srv/cache'],
        denyWrite: [],
      },
      ripgrep: { command: '/bin/claude', argv0: 'rg' },
    });
  });
});

describe('`logs` of a command stage', () => {
  test('shows its output line by line, stderr marked', () => {
    const formatter = new TranscriptFormatter(loadModelCatalog({}));
    expect(formatter.format(JSON.stringify({ type: 'command', stream: 'stdout', text: 'ok 1' }))).toEqual(['ok 1']);
    expect(formatter.format(JSON.stringify({ type: 'command', stream: 'stderr', text: 'failed' }))).toEqual(['[stderr] failed']);
  });
});

describe("a command's answer", () => {
  const record = { artifacts: [], warnings: [], attempt: 1 } as unknown as AttemptRecord;
  const outcome = (text: string) => ({ text, usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, numTurns: 0, durationMs: 1, warnings: [] });
  const stage = (outputs?: 'json') => ({ id: 't', run: 'x', ...(outputs ? { outputs } : {}) }) as unknown as ResolvedStage;

  test('is its stdout, summed up by its last line; with `outputs: json` that line, a JSON object, is the outputs', () => {
    expect(readCommandAnswer(stage(), outcome('building\nall 3 passed\n'), record, '/nowhere')).toMatchObject({ status: 'completed', summary: 'all 3 passed', answer: 'building\nall 3 passed', outputs: {} });
    expect(readCommandAnswer(stage('json'), outcome('all 3 passed\n{"passed": true}\n'), record, '/nowhere')).toMatchObject({ summary: 'all 3 passed', outputs: { passed: true } });
    expect(readCommandAnswer(stage(), outcome(''), record, '/nowhere').summary).toBe('the command exited with code 0');
  });

  test('fails OUTPUT_CONTRACT_VIOLATION, not retried, when `outputs: json` finds no JSON object on the last line', () => {
    for (const text of ['done\n', '[1, 2]\n', '']) {
      expect(() => readCommandAnswer(stage('json'), outcome(text), record, '/nowhere')).toThrow(/\[OUTPUT_CONTRACT_VIOLATION\] stage t: the stage says `outputs: json`, and the last line of the command's stdout is not a JSON object/);
    }
  });
});
