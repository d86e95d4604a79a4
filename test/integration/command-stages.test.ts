import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome, processesWith, waitFor } from './claude-cli-world.js';
import { pastedArguments, runCli, runCliCommands } from './cli-helpers.js';
import { shellWord } from '../../src/pipeline/shell-words.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Command stages (issue 31): a stage with `run:` runs a command in the run's workspace, no model. With the real worker,
 * real Temporal, real git and the real sandbox (bubblewrap through @anthropic-ai/sandbox-runtime) under
 * AGENT_PIPELINE_SANDBOX=required: exit codes and stderr, inputs only as data, no worker secret unless allowed, no write
 * outside the workspace and no read of the worker's home, a clean stop on cancel, its commit, its JSON outputs.
 */

const DEPLOY_TOKEN = 'dtk_command-stage-secret-5e1f';
const PASSED_TOKEN = 'ptk_command-stage-passed-9a3c';
const sha = (value: string): string => createHash('sha256').update(value).digest('hex');

let harness: Harness;
let scratch: string;
let home: string;
let outside: string;
let repo: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'command-stages-'));
  home = await emptyHome(scratch);
  await mkdir(path.join(home, '.ssh'), { recursive: true });
  await writeFile(path.join(home, '.ssh', 'id_test'), 'PRIVATE-KEY-OF-THE-WORKER\n', { mode: 0o600 });
  outside = await mkdtemp(path.join(tmpdir(), 'command-stages-outside-'));
  repo = path.join(scratch, 'repo');
  await initRepo(repo, {
    'package.json': JSON.stringify({ name: 'probe', version: '1.0.0', scripts: { test: 'echo "2 tests failed: expected 3, got 4" >&2; exit 1' } }),
  });
  harness = await createHarness('command-stages', {
    scenario: { rules: [] },
    env: {
      HOME: home,
      AGENT_PIPELINE_SANDBOX: 'required',
      DEPLOY_TOKEN,
      PASSED_TOKEN,
      AGENT_PIPELINE_COMMAND_ENV: 'PASSED_TOKEN,UNSET_TOKEN',
      AGENT_PIPELINE_KILL_GRACE: '1s',
      // No checkpoints: no test here forks or restores a run, and each stage's first-start checkpoint (the default fork
      // point) spawned `tar` in bubblewrap from this process (issue 32). Commands run as with them: checkpoints are
      // taken around the command, in the stage activity.
      AGENT_PIPELINE_CHECKPOINTS: 'off',
    },
  });
});

afterAll(async () => {
  await harness?.close();
  for (const dir of [scratch, outside]) if (dir) await rm(dir, { recursive: true, force: true });
});

const header = (name: string, extra = ''): string => `name: ${name}\ndefaults: { heartbeatTimeout: 30s, retries: 0 }\n${extra}stages:\n`;

/** Every file below `dir`, as paths relative to it. */
async function filesBelow(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true }).catch(() => [] as string[]);
  return entries.map(String);
}

describe.skipIf(MISSING_SANDBOX_PACKAGES.length > 0)('a command stage', () => {
  test('fails COMMAND_FAILED with the exit code and stderr of a failing `npm test`', { timeout: 120_000 }, async () => {
    const yaml = header('cmd-npm', `workspace: { repo: ${repo} }\n`) + '  - id: test\n    run: npm test\n';
    const state = await harness.finish(await harness.startYaml('cmd-npm', yaml));
    expectNoStageLeftRunning(state);
    expect(state.status).toBe('failed');
    const stage = stageOf(state, 'test');
    expect(stage.error?.type, JSON.stringify(stage)).toBe('COMMAND_FAILED');
    expect(stage.error?.message).toContain('"npm test" exited with code 1');
    expect(stage.error?.message).toContain('2 tests failed: expected 3, got 4');
    expect(stage.backend).toBe('command');
    // Its hint is a command to paste: the run's own id, not a placeholder.
    expect(stage.error?.message).toContain(`agent-pipeline logs ${state.runId} --stage test`);
    // `status` says what failed and why.
    const status = await runCli(['status', state.runId], harness.env);
    expect(status.all).toContain('COMMAND_FAILED');
  });

  test('shows the workspace of a run whose first stage failed and waits (`onFailure: ask`), so a person can fix it and retry', { timeout: 120_000 }, async () => {
    // No stage has completed, so no result names the workspace: the failure carries it (it did not, and `status`
    // offered `retry` with no word of the folder to fix).
    const yaml = header('cmd-ask') + '  - id: check\n    run: \'test -f ok.flag || { echo "missing ok.flag" >&2; exit 1; }\'\n    onFailure: ask\n';
    const handle = await harness.startYaml('cmd-ask', yaml);
    const waiting = await waitForWaiting(handle, 'check', 'failure');
    const dir = harness.runDir(handle.workflowId);
    expect(waiting.workspace).toBe(dir);
    const status = await runCli(['status', handle.workflowId], harness.env);
    expect(status.stdout).toContain(`Workspace: ${dir}`);
    // With the folder named, the fix and the retry take the run to its end.
    await writeFile(path.join(dir, 'ok.flag'), '');
    const retry = await runCli(['retry', handle.workflowId, '--stage', 'check'], harness.env);
    expect(retry.exitCode, retry.stderr).toBe(0);
    expect((await harness.finish(handle)).status).toBe('completed');
  });

  test('waiting after a failure (`onFailure: ask`), offers no `retry --feedback`, refuses one naming the stage and the fix, and prints commands that paste as shown', { timeout: 120_000 }, async () => {
    // Nothing reads feedback in a command stage: `status` offered `retry --feedback`, and the retry took it and dropped it.
    const yaml = header('cmd-nofeedback') + "  - id: check\n    run: 'test -f ok.flag || exit 1'\n    onFailure: ask\n";
    const id = `cmd ask $(touch pwned); it's ${Math.random().toString(36).slice(2, 8)}`;
    const handle = await harness.startYaml('cmd-nofeedback', yaml, id);
    await waitForWaiting(handle, 'check', 'failure');
    const [status, refused] = await runCliCommands([['status', id], ['retry', id, '--stage', 'check', '--feedback', 'Try harder.']], harness.env);
    expect(status.exitCode, status.stderr).toBe(0);
    const offered = status.stdout.split('\n').filter((line) => line.includes('→ agent-pipeline '));
    const pasteDir = await mkdtemp(path.join(scratch, 'paste-'));
    const pasted = await Promise.all(offered.map((line) => pastedArguments(line, pasteDir)));
    expect(pasted).toEqual([['retry', id, '--stage', 'check'], ['skip', id, '--stage', 'check'], ['cancel', id]]);
    expect(refused.exitCode, refused.all).toBe(2);
    expect(refused.stderr).toContain(`stage check runs a command (\`run:\`), with no agent to read --feedback; retry it without: agent-pipeline retry ${shellWord(id)} --stage check`);
    // The retry as printed, pasted, takes the fixed stage to the run's end.
    await writeFile(path.join(harness.runDir(id), 'ok.flag'), '');
    const retried = await runCli(pasted[0], harness.env);
    expect(retried.exitCode, retried.all).toBe(0);
    expect((await harness.finish(handle)).status).toBe('completed');
    expect(await readdir(pasteDir)).toEqual([]);
  });

  test("asks in vain to run unsandboxed on a worker whose operator said `required`: SANDBOX_OPT_OUT_REFUSED, the command never runs", { timeout: 60_000 }, async () => {
    const handle = await harness.startYaml('cmd-optout', header('cmd-optout') + '  - id: free\n    run: "echo ran > ran.txt"\n    sandbox: false\n');
    const state = await harness.finish(handle);
    const stage = stageOf(state, 'free');
    expect(stage.error?.type, JSON.stringify(stage)).toBe('SANDBOX_OPT_OUT_REFUSED');
    expect(stage.error?.message).toContain('AGENT_PIPELINE_SANDBOX=permissive');
    expect(existsSync(path.join(harness.runDir(handle.workflowId), 'ran.txt'))).toBe(false);
  });

  test('gets an input only as data: `; touch pwned` is written as text, and no file pwned appears', { timeout: 120_000 }, async () => {
    const yaml =
      `name: cmd-data\ninputs: { bead: { required: true } }\ndefaults: { heartbeatTimeout: 30s, retries: 0 }\nstages:\n` +
      '  - id: shell\n    run: printf "%s" "$BEAD" > bead.txt\n    env: { BEAD: "{{inputs.bead}}" }\n' +
      '  - id: argv\n    needs: [shell]\n    run: [sh, -c, "printf %s \\"$BEAD\\" > argv.txt"]\n    env: { BEAD: "{{inputs.bead}}" }\n';
    const value = 'x"; touch pwned; echo $(touch pwned2) `touch pwned3` \'; touch pwned4';
    const handle = await harness.start(await harness.writePipeline('cmd-data', yaml), { bead: value });
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.stages)).toBe('completed');
    const dir = harness.runDir(handle.workflowId);
    expect(await readFile(path.join(dir, 'bead.txt'), 'utf8')).toBe(value);
    expect(await readFile(path.join(dir, 'argv.txt'), 'utf8')).toBe(value);
    // The files the value would make, not another test's run folder whose id holds the words (`cmd-ask-$(touch pwned)…`).
    for (const where of [dir, harness.workspacesRoot, process.cwd(), home]) expect((await filesBelow(where)).filter((f) => /(^|\/)pwned\d?$/.test(f))).toEqual([]);
  });

  test('gets no worker secret unless `passEnv` names it and AGENT_PIPELINE_COMMAND_ENV allows it', { timeout: 120_000 }, async () => {
    const probe = [
      'for v in ANTHROPIC_API_KEY DEPLOY_TOKEN AGENT_PIPELINE_COMMAND_ENV; do if [ -n "$(printenv $v)" ]; then echo "HAS $v"; fi; done',
      'printf %s "$PASSED_TOKEN" | sha256sum | cut -c1-64 > passed.sha',
      `for f in /proc/[0-9]*/environ; do if grep -qaF -e "$(printf %s '${[...DEPLOY_TOKEN].reverse().join('')}' | rev)" "$f" 2>/dev/null; then echo "FOUND $f"; fi; done`,
      'echo "HOME=$HOME"',
      'echo probed',
    ].join('; ');
    const yaml = header('cmd-env') + `  - id: probe\n    run: ${JSON.stringify(probe)}\n    passEnv: [PASSED_TOKEN, UNSET_TOKEN]\n` + '  - id: refused\n    needs: [probe]\n    run: "true"\n    passEnv: [DEPLOY_TOKEN]\n';
    const handle = await harness.startYaml('cmd-env', yaml);
    const state = await harness.finish(handle);
    const probed = stageOf(state, 'probe');
    expect(probed.status, JSON.stringify(probed)).toBe('completed');
    expect(probed.result?.answer).toContain('probed');
    expect(probed.result?.answer).not.toContain('HAS ');
    expect(probed.result?.answer).not.toContain('FOUND');
    // Allowed, but the worker has none: said, not silently left out.
    expect(probed.result?.warnings).toContainEqual(expect.stringContaining('`passEnv` names UNSET_TOKEN, which this worker allows but does not have set'));
    // The run's own home, never the worker's.
    expect(probed.result?.answer).not.toContain(`HOME=${home}`);
    expect((await readFile(path.join(harness.runDir(handle.workflowId), 'passed.sha'), 'utf8')).trim()).toBe(sha(PASSED_TOKEN));
    const refused = stageOf(state, 'refused');
    expect(refused.error?.type).toBe('CONFIG_INVALID');
    expect(refused.error?.message).toContain('`passEnv` names DEPLOY_TOKEN');
    expect(refused.error?.message).toContain('AGENT_PIPELINE_COMMAND_ENV=PASSED_TOKEN,UNSET_TOKEN');
  });

  test("cannot write outside its workspace nor read the worker's home", { timeout: 120_000 }, async () => {
    const probe = [
      `(echo escaped > ${JSON.stringify(path.join(outside, 'escaped.txt'))}) 2>/dev/null && echo WROTE-OUTSIDE`,
      `(cat ${JSON.stringify(path.join(home, '.ssh', 'id_test'))}) 2>/dev/null && echo READ-HOME`,
      'echo inside > inside.txt && echo WROTE-INSIDE',
    ].join('; ');
    const handle = await harness.startYaml('cmd-box', header('cmd-box') + `  - id: box\n    run: ${JSON.stringify(probe)}\n`);
    const state = await harness.finish(handle);
    const answer = stageOf(state, 'box').result?.answer ?? '';
    expect(answer, JSON.stringify(state.stages)).toContain('WROTE-INSIDE');
    expect(answer).not.toContain('WROTE-OUTSIDE');
    expect(answer).not.toContain('READ-HOME');
    expect(answer).not.toContain('PRIVATE-KEY');
    expect(existsSync(path.join(outside, 'escaped.txt'))).toBe(false);
    expect(existsSync(path.join(harness.runDir(handle.workflowId), 'inside.txt'))).toBe(true);
  });

  test("keeps its `env:` away from the programs that build its sandbox: NODE_OPTIONS and PATH run nothing outside, and reach the command as data", { timeout: 120_000 }, async () => {
    const escaped = path.join(outside, 'escaped-launcher.txt');
    // Given to the sandbox runtime's node (outside the sandbox), this read the worker's secrets from /proc and wrote them here.
    const nodeOptions = `--import data:text/javascript,import{writeFileSync,readFileSync}from'node:fs';writeFileSync('${escaped}',readFileSync('/proc/'+process.ppid+'/environ'));`;
    const tricky = 'it\'s "$(touch pwned)" `touch pwned2` \\ $HOME\n; end';
    const run = 'printf %s "$NODE_OPTIONS" > node-options.txt; printf %s "$TRICKY" > tricky.txt; printf %s "$PATH" > path.txt; ls -A "$HOME" > home.txt';
    const env = { NODE_OPTIONS: nodeOptions, PATH: '/usr/bin:/bin', TRICKY: tricky };
    const handle = await harness.startYaml('cmd-launcher', header('cmd-launcher') + `  - id: env\n    run: ${JSON.stringify(run)}\n    env: ${JSON.stringify(env)}\n`);
    const state = await harness.finish(handle);
    expect(stageOf(state, 'env').status, JSON.stringify(state.stages)).toBe('completed');
    expect(existsSync(escaped)).toBe(false);
    const dir = harness.runDir(handle.workflowId);
    expect(await readFile(path.join(dir, 'node-options.txt'), 'utf8')).toBe(nodeOptions);
    expect(await readFile(path.join(dir, 'tricky.txt'), 'utf8')).toBe(tricky);
    expect(await readFile(path.join(dir, 'path.txt'), 'utf8')).toBe('/usr/bin:/bin');
    // The file that carried the environment in is gone before the command runs.
    expect(await readFile(path.join(dir, 'home.txt'), 'utf8')).not.toContain('.agent-pipeline-env-');
    expect((await filesBelow(dir)).filter((f) => /pwned/.test(f))).toEqual([]);
  });

  test('runs side by side with the other command stages of its workspace: none fails because another sandbox went away', { timeout: 120_000 }, async () => {
    // Each sandbox binds placeholders of absent files (`.gitconfig`…) that its `srt` removes at exit; a sandbox started
    // meanwhile failed to bind them ("bwrap: Can't find source path"), so parallel stages failed one run in two.
    const stages = Array.from({ length: 8 }, (_, i) => `  - id: p${i}\n    run: "echo p${i} > p${i}.txt; sleep 0.${i}"\n`).join('');
    const states = await Promise.all([1, 2, 3].map(async (n) => harness.finish(await harness.startYaml(`cmd-parallel-${n}`, header(`cmd-parallel-${n}`) + stages))));
    for (const state of states) expect(state.stages.filter((s) => s.status !== 'completed').map((s) => s.error?.message), state.runId).toEqual([]);
  });

  test('stops cleanly on cancel: every process it started is gone and the run is cancelled', { timeout: 120_000 }, async () => {
    const yaml = header('cmd-cancel') + '  - id: long\n    run: "(sleep 300 &) ; echo started > started.txt; sleep 300"\n';
    const handle = await harness.startYaml('cmd-cancel', yaml);
    const stageDir = path.join(harness.runBookkeeping(handle.workflowId), 'stages', 'long');
    await waitFor(() => existsSync(path.join(harness.runDir(handle.workflowId), 'started.txt')), Boolean, 'the command to start', 60_000);
    expect((await processesWith(STAGE_MARKER, `${stageDir}#`, 'prefix')).length).toBeGreaterThan(0);
    expect((await runCli(['cancel', handle.workflowId], harness.env)).exitCode).toBe(0);
    const state = await harness.finish(handle);
    expect(state.status).toBe('cancelled');
    expect(await processesWith(STAGE_MARKER, `${stageDir}#`, 'prefix')).toEqual([]);
  });

  test('commits its work on the run branch, and `outputs: json` gives the outputs', { timeout: 120_000 }, async () => {
    const yaml =
      header('cmd-commit', `workspace: { repo: ${repo}, branch: "cmd/{{run.id}}" }\n`) +
      '  - id: build\n    run: "echo built > built.txt && echo wrote built.txt && echo \'{\\"passed\\": true, \\"count\\": 3}\'"\n    outputs: json\n    commit: true\n' +
      '  - id: after\n    needs: [build]\n    when: "{{stages.build.outputs.passed}} == true"\n    run: [sh, -c, "echo after"]\n';
    const handle = await harness.startYaml('cmd-commit', yaml);
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.stages)).toBe('completed');
    const build = stageOf(state, 'build');
    expect(build.result?.outputs).toEqual({ passed: true, count: 3 });
    expect(build.result?.summary).toBe('wrote built.txt');
    expect(stageOf(state, 'after').status).toBe('completed');
    const files = await git(repo, 'show', '--name-only', '--format=%s', `cmd/${handle.workflowId}`);
    expect(files).toContain('built.txt');
    // `logs` shows its output as the stage's transcript.
    const logs = await runCli(['logs', handle.workflowId, '--stage', 'build'], harness.env);
    expect(logs.all).toContain('wrote built.txt');
  });

  test("prints what a command wrote with no terminal control left: `logs` and `status` show the text, never an escape that writes the clipboard or clears the screen", { timeout: 120_000 }, async () => {
    // OSC 52 (write the clipboard), erase the screen, OSC 0 (the window title), a bell: what a run's output could do to
    // the terminal of whoever looks at it.
    const yaml = header('cmd-escapes') + "  - id: loud\n    run: [printf, 'before\\033]52;c;ZXZpbA==\\007\\033[2J\\033]0;pwned\\007after\\007\\n']\n";
    const state = await harness.finish(await harness.startYaml('cmd-escapes', yaml));
    expect(state.status, JSON.stringify(state.stages)).toBe('completed');
    expect(stageOf(state, 'loud').result?.answer).toContain('\u001b]52;c;');
    for (const command of [['logs', state.runId, '--stage', 'loud'], ['status', state.runId]]) {
      const printed = await runCli(command, harness.env);
      expect(printed.exitCode, printed.all).toBe(0);
      expect(printed.stdout).toContain('beforeafter\u2407');
      expect(printed.stdout).not.toMatch(/[\u0007\u001b]/u);
    }
  });

  test('`validate` refuses a template inside `run:` and an unknown variable in `env:`, exit 2, naming the stage and field', { timeout: 60_000 }, async () => {
    const templated = await harness.writePipeline('cmd-validate', 'name: v\ninputs: { bead: { required: true } }\nstages:\n  - id: track\n    run: bd update {{inputs.bead}}\n');
    const refused = await runCli(['validate', templated], harness.env);
    expect(refused.exitCode).toBe(2);
    expect(refused.all).toContain('stages[0].run');
    expect(refused.all).toContain('stage "track": `run:` is literal text and may not hold a template');
    expect(refused.all).toContain('pass the value through `env:`');
    const unknown = await harness.writePipeline('cmd-validate-env', 'name: v\nstages:\n  - id: track\n    run: bd update "$BEAD"\n    env: { BEAD: "{{inputs.bead}}" }\n');
    const env = await runCli(['validate', unknown], harness.env);
    expect(env.exitCode).toBe(2);
    expect(env.all).toContain('stages[0].env.BEAD');
    expect(env.all).toContain('the pipeline declares no such input');
  });
});
