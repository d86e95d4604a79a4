import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { Lane } from '../helpers/lanes.js';
import { runCli } from './cli-helpers.js';
import { approveStageUpdate } from '../../src/contracts/messages.js';
import { expectNoStageLeftRunning, stageOf, waitForState, waitForWaiting } from './workflow-helpers.js';

/*
 * `workspace.dir`: runs that work in an existing folder they were lent, end to end with the real `claude` binary,
 * a real worker and a scripted model. The worker allows only `<base>/allowed`.
 */

const REPORT = (summary: string): string => `\`\`\`json\n{"success": true, "summary": "${summary}", "outputs": {}}\n\`\`\``;

const SHARED_PIPELINE = `
name: shared-notes
inputs:
  dir: { description: the folder to work in }
workspace: { dir: "{{inputs.dir}}" }
context:
  - { path: context/brief.md, from: workspace }
stages:
  - id: notes
    backend: claude-cli
    model: haiku
    permissionMode: acceptEdits
    allowedTools: [Bash, Read, Write]
    prompt: Write the launch notes into outputs/notes.md.
`;

/** A claude-cli stage that writes into its folder, without context files (so nothing but the agent touches the folder). */
const NOTES_PIPELINE = `
name: notes-in-folder
inputs:
  dir: { description: the folder to work in }
workspace: { dir: "{{inputs.dir}}" }
stages:
  - id: notes
    backend: claude-cli
    model: haiku
    permissionMode: acceptEdits
    allowedTools: [Bash, Read, Write]
    prompt: Write the launch notes into outputs/notes.md.
`;

/** A run whose agent replaces the folder \`a\` inside its own folder with a symlink leading out (the attack of issue 33, item 5). */
const SWAP_PIPELINE = `
name: swaps-a-folder
inputs:
  dir: { description: the folder to work in }
workspace: { dir: "{{inputs.dir}}" }
stages:
  - id: swap
    backend: claude-cli
    model: haiku
    permissionMode: acceptEdits
    allowedTools: [Bash]
    prompt: Swap the folder a for a link.
`;

/** A run that holds its folder at an approval gate until the test approves. */
const holdingPipeline = (name: string, dir: string): string =>
  `name: ${name}\nworkspace: { dir: ${JSON.stringify(dir)} }\nstages:\n  - { id: write, backend: anthropic-api, model: haiku, contract: none, prompt: "slow run: write the notes." }\n  - { id: gate, needs: [write], approval: true }\n`;

// Two harnesses, each a lane of tests run one at a time (each test works in folders of its own): the lanes run at
// once, overlapping their waits for people, for folders and for the check on a terminated holder (issue 32); they
// take about as long as each other. The timeout counts the wait for a lane's earlier tests.
describe.concurrent('a run in an existing folder (workspace.dir)', { timeout: 300_000 }, () => {
  let harnesses: Harness[] = [];
  const [laneA, laneB] = [0, 1].map((i) => new Lane(() => harnesses[i]));
  let base: string;
  let allowed: string;
  let outside: string;
  /** Outside every allowed folder: where the swapped symlinks lead. Nothing may ever be written here. */
  let away: string;
  beforeAll(async () => {
    base = await mkdtemp(path.join(tmpdir(), 'workspace-dir-'));
    allowed = path.join(base, 'allowed');
    outside = path.join(base, 'outside');
    away = path.join(base, 'away');
    await mkdir(allowed, { recursive: true });
    await mkdir(outside, { recursive: true });
    await mkdir(away, { recursive: true });
    const options = {
      env: { AGENT_PIPELINE_ALLOWED_PATHS: allowed },
      scenario: {
        rules: [
          { name: 'slow', match: 'slow run: write', turns: [{ text: 'First notes.' }] },
          { name: 'fast', match: 'fast run: write', turns: [{ text: 'Fast notes.' }] },
          {
            name: 'swap',
            match: 'Swap the folder a',
            turns: [
              { tool: { name: 'Bash', input: { command: `mv a a.orig && ln -s ${JSON.stringify(path.join(base, 'away'))} a`, description: 'Swap the folder' } } },
              { text: `Swapped.\n${REPORT('Replaced a with a link.')}` },
            ],
          },
          {
            name: 'notes',
            match: 'Write the launch notes',
            turns: [
              { tool: { name: 'Bash', input: { command: 'mkdir -p outputs && printf "# Launch notes\\n" > outputs/notes.md', description: 'Write the notes' } } },
              { text: `Wrote the notes.\n${REPORT('Wrote outputs/notes.md.')}` },
            ],
          },
        ],
      },
    };
    harnesses = await Promise.all(['a', 'b'].map((lane) => createHarness(`workspace-dir-${lane}`, options)));
  });
  afterAll(async () => {
    await Promise.all(harnesses.map((harness) => harness.close()));
    await rm(base, { recursive: true, force: true });
  });

  const startIn = async (harness: Harness, dir: string, id?: string) => harness.start(await harness.writePipeline('shared-notes', SHARED_PIPELINE), { dir }, id);

  test('writes its outputs in the folder, reads context from it, and leaves no bookkeeping there', () =>
    laneA.run(async (harness) => {
      const shared = path.join(allowed, 'team-space');
      await mkdir(path.join(shared, 'context'), { recursive: true });
      await writeFile(path.join(shared, 'context', 'brief.md'), 'Product: Tandem, read from the shared folder.\n');
      await writeFile(path.join(shared, 'kept.txt'), 'a file the team had before the run\n');
      harness.modelServer.reset();
      const handle = await startIn(harness, shared);
      const state = await harness.finish(handle);
      expectNoStageLeftRunning(state);
      expect(state.status, JSON.stringify(state.error)).toBe('completed');
      // The agents worked in the lent folder: the output is there, the team's own file untouched.
      expect(state.workspace).toBe(await realpath(shared));
      expect(await readFile(path.join(shared, 'outputs', 'notes.md'), 'utf8')).toBe('# Launch notes\n');
      expect(await readFile(path.join(shared, 'kept.txt'), 'utf8')).toBe('a file the team had before the run\n');
      const result = stageOf(state, 'notes').result!;
      expect(result.artifacts.map((a) => a.path)).toEqual(['outputs/notes.md']);
      // The context file was read from the folder when the stage ran (it is not in the pipeline's folder at all).
      const request = harness.modelServer.requests().find((r) => r.rule === 'notes' && r.status === 200);
      expect(JSON.stringify(request?.body)).toContain('Product: Tandem, read from the shared folder.');
      // Nothing of the worker's own is left in the folder: transcripts and sessions stay in the run's bookkeeping.
      // (Claude Code itself leaves `.claude/.cc-writes`, an empty file it probes the file system with.)
      expect((await readdir(shared)).filter((f) => f !== '.claude').sort()).toEqual(['context', 'kept.txt', 'outputs']);
      expect((await readdir(path.join(shared, '.claude')).catch(() => [])).filter((f) => f !== '.cc-writes')).toEqual([]);
      expect(existsSync(path.join(shared, '.agent-pipeline'))).toBe(false);
      expect(existsSync(path.join(harness.workspacesRoot, result.transcript!))).toBe(true);
      // And no run folder of its own is made for it under the workspaces root.
      expect(existsSync(harness.runDir(handle.workflowId))).toBe(false);
      // `logs` finds the transcript there, though the run's workspace is the lent folder.
      const logs = await runCli(['logs', handle.workflowId, '--stage', 'notes'], { ...harness.env, PATH: process.env.PATH });
      expect(logs.exitCode, logs.stderr).toBe(0);
      expect(logs.stdout).toContain('→ Bash');
      expect(logs.stdout).toContain('Wrote the notes.');
    }));

  test('lets one run at a time work in a folder: a second run waits, visibly in status, until the first has ended', () =>
    laneB.run(async (harness) => {
      const shared = path.join(allowed, 'one-at-a-time');
      await mkdir(shared, { recursive: true });
      const stage = (which: string): string => `
  - id: write
    backend: anthropic-api
    model: haiku
    contract: none
    prompt: "${which} run: write the notes."
    output: "outputs/${which}.md"`;
      // The first run keeps the folder while it waits for a person at its gate: the folder is held for the run's life.
      const first = await harness.writePipeline('holds-folder', `name: holds-folder\nworkspace: { dir: ${JSON.stringify(shared)} }\nstages:${stage('slow')}\n  - { id: gate, needs: [write], approval: true }\n`);
      const second = await harness.writePipeline('waits-for-folder', `name: waits-for-folder\nworkspace: { dir: ${JSON.stringify(shared)} }\nstages:${stage('fast')}\n`);
      harness.modelServer.reset();
      const holder = await harness.start(first);
      await waitForWaiting(holder, 'gate', 'approval');
      const waiter = await harness.start(second);
      // The second run's stage says what it waits for; its agent has not started.
      const waiting = await waitForState(waiter, (s) => stageOf(s, 'write').leaseWait !== undefined);
      expect(stageOf(waiting, 'write').leaseWait).toMatchObject({ key: `workspace.dir:${await realpath(shared)}`, ahead: 0, holders: 1, limit: 1 });
      expect(harness.modelServer.requests().filter((r) => r.rule === 'fast')).toEqual([]);
      await holder.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });
      const [holderState, waiterState] = await Promise.all([harness.finish(holder), harness.finish(waiter)]);
      expect(holderState.status, JSON.stringify(holderState.error)).toBe('completed');
      expect(waiterState.status, JSON.stringify(waiterState.error)).toBe('completed');
      expect(stageOf(waiterState, 'write').leaseWait).toBeUndefined();
      expect(await readFile(path.join(shared, 'outputs', 'slow.md'), 'utf8')).toBe('First notes.');
      expect(await readFile(path.join(shared, 'outputs', 'fast.md'), 'utf8')).toBe('Fast notes.');
      // The second run's agent started only once the first run had ended: never two runs working in the folder.
      const fastRequest = harness.modelServer.requests().find((r) => r.rule === 'fast')!;
      expect(Date.parse(fastRequest.time)).toBeGreaterThanOrEqual(stageOf(holderState, 'gate').finishedAt!);
    }));

  test('lets runs that all say shared: true work in one folder at once; a run without it waits until they have ended', () =>
    laneB.run(async (harness) => {
      const folder = path.join(allowed, 'shared-by-runs');
      await mkdir(folder, { recursive: true });
      const write = (which: string, output: string): string =>
        `\n  - { id: write, backend: anthropic-api, model: haiku, contract: none, prompt: "${which} run: write the notes.", output: "outputs/${output}.md" }`;
      const workspace = (shared: boolean): string => `workspace: { dir: ${JSON.stringify(folder)}${shared ? ', shared: true' : ''} }`;
      const holding = await harness.writePipeline('shared-holds', `name: shared-holds\n${workspace(true)}\nstages:${write('slow', 'a')}\n  - { id: gate, needs: [write], approval: true }\n`);
      const alongside = await harness.writePipeline('shared-alongside', `name: shared-alongside\n${workspace(true)}\nstages:${write('fast', 'b')}\n`);
      const alone = await harness.writePipeline('not-shared', `name: not-shared\n${workspace(false)}\nstages:${write('fast', 'c')}\n`);
      const first = await harness.start(holding);
      await waitForWaiting(first, 'gate', 'approval');
      // A second shared run works in the folder while the first still holds it at its gate.
      const second = await harness.finish(await harness.start(alongside));
      expect(second.status, JSON.stringify(second.error)).toBe('completed');
      expect(stageOf(second, 'write').leaseWait).toBeUndefined();
      expect(await readFile(path.join(folder, 'outputs', 'b.md'), 'utf8')).toBe('Fast notes.');
      // A run that does not share waits for the shared runs, visibly, and starts once the first has ended.
      const third = await harness.start(alone);
      const waiting = await waitForState(third, (s) => stageOf(s, 'write').leaseWait !== undefined);
      expect(stageOf(waiting, 'write').leaseWait).toMatchObject({ key: `workspace.dir.shared:${await realpath(folder)}`, holders: 1 });
      expect(existsSync(path.join(folder, 'outputs', 'c.md'))).toBe(false);
      await first.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });
      const [firstState, thirdState] = await Promise.all([harness.finish(first), harness.finish(third)]);
      expect(firstState.status, JSON.stringify(firstState.error)).toBe('completed');
      expect(thirdState.status, JSON.stringify(thirdState.error)).toBe('completed');
      expect(await readFile(path.join(folder, 'outputs', 'c.md'), 'utf8')).toBe('Fast notes.');
    }));

  test('a run that was terminated while holding the folder does not keep it locked', () =>
    laneA.run(async (harness) => {
      const shared = path.join(allowed, 'terminated-holder');
      await mkdir(shared, { recursive: true });
      const first = await harness.writePipeline('terminated-holder', `name: terminated-holder\nworkspace: { dir: ${JSON.stringify(shared)} }\nstages:\n  - { id: write, backend: anthropic-api, model: haiku, contract: none, prompt: "slow run: write the notes." }\n  - { id: gate, needs: [write], approval: true }\n`);
      const second = await harness.writePipeline('after-terminated', `name: after-terminated\nworkspace: { dir: ${JSON.stringify(shared)} }\nstages:\n  - { id: write, backend: anthropic-api, model: haiku, contract: none, prompt: "fast run: write the notes." }\n`);
      const holder = await harness.start(first);
      await waitForWaiting(holder, 'gate', 'approval');
      const waiter = await harness.start(second);
      await waitForState(waiter, (s) => stageOf(s, 'write').leaseWait !== undefined);
      // Terminated: no code of the run runs again, nothing gives the folder back but the waiting run's check.
      await holder.terminate('the test ends it without clean-up');
      const state = await harness.finish(waiter);
      expect(state.status, JSON.stringify(state.error)).toBe('completed');
      expect(await readFile(path.join(shared, 'outputs', 'write.md'), 'utf8')).toBe('Fast notes.');
    }));

  test('refuses a folder outside AGENT_PIPELINE_ALLOWED_PATHS, and a symlink inside that leads out', () =>
    laneB.run(async (harness) => {
      for (const dir of [outside, path.join(allowed, 'link-out')]) {
        if (dir.endsWith('link-out')) await symlink(outside, dir);
        harness.modelServer.reset();
        const state = await harness.finish(await startIn(harness, dir));
        expect(state.status).toBe('failed');
        expect(state.error?.type).toBe('CONFIG_INVALID');
        expect(state.error?.message).toContain(`workspace.dir names ${dir}`);
        expect(state.error?.message).toContain(dir === outside ? `names ${outside}, a folder this worker does not lend to runs` : `(which leads to ${outside}), a folder this worker does not lend to runs`);
        expect(state.error?.message).toContain('AGENT_PIPELINE_ALLOWED_PATHS');
        // At once: one attempt, and no agent ever ran.
        expect(stageOf(state, 'notes').totals?.attempts ?? 1).toBe(1);
        expect(harness.modelServer.requests().filter((r) => r.path.startsWith('/v1/messages'))).toEqual([]);
        expect(await readdir(outside)).toEqual([]);
      }
    }));

  test('fails at once, naming the folder, when it does not exist', () =>
    laneB.run(async (harness) => {
      const missing = path.join(allowed, 'no-such-folder');
      const state = await harness.finish(await startIn(harness, missing));
      expect(state.status).toBe('failed');
      expect(state.error?.type).toBe('FILE_NOT_FOUND');
      expect(state.error?.message).toContain(`workspace.dir ${missing} does not exist`);
      expect(existsSync(missing)).toBe(false);
    }));

  test('checks the folder again once the run holds it: a folder swapped for a symlink leading out while the run waited is refused, and nothing is written there', () =>
    laneA.run(async (harness) => {
      const folder = path.join(allowed, 'swapped', 'a');
      await mkdir(folder, { recursive: true });
      harness.modelServer.reset();
      const holder = await harness.start(await harness.writePipeline('holds-swapped', holdingPipeline('holds-swapped', folder)));
      await waitForWaiting(holder, 'gate', 'approval');
      const waiter = await harness.start(await harness.writePipeline('notes-in-folder', NOTES_PIPELINE), { dir: folder });
      await waitForState(waiter, (s) => stageOf(s, 'notes').leaseWait !== undefined);
      // While the run waits for the folder (checked, real path known), it is replaced by a symlink leading out.
      await rename(folder, `${folder}.orig`);
      await symlink(away, folder);
      await holder.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });
      const [holderState, waiterState] = await Promise.all([harness.finish(holder), harness.finish(waiter)]);
      // Nothing was written outside (before this fix, the agent wrote its notes there).
      expect(await readdir(away)).toEqual([]);
      expect(holderState.status, JSON.stringify(holderState.error)).toBe('completed');
      expect(waiterState.status).toBe('failed');
      expect(waiterState.error?.type).toBe('CONFIG_INVALID');
      expect(waiterState.error?.message).toContain(`workspace.dir ${folder} changed while the run waited for it`);
      expect(waiterState.error?.message).toContain(away);
      // Refused for good, before its agent started: no model request was made.
      expect(stageOf(waiterState, 'notes').totals?.attempts ?? 1).toBe(1);
      expect(harness.modelServer.requests().filter((r) => r.rule === 'notes')).toEqual([]);
    }));

  test('never lends a folder inside, or around, a folder another run holds: each waits until the other has ended', () =>
    laneB.run(async (harness) => {
      const parent = path.join(allowed, 'nested');
      const child = path.join(parent, 'a');
      await mkdir(child, { recursive: true });
      harness.modelServer.reset();
      // A run holds the child folder; a run lent the parent (whose agent would swap the child) must wait for it.
      const holder = await harness.start(await harness.writePipeline('holds-child', holdingPipeline('holds-child', child)));
      await waitForWaiting(holder, 'gate', 'approval');
      const swapper = await harness.start(await harness.writePipeline('swaps-a-folder', SWAP_PIPELINE), { dir: parent });
      // (Ended, it did not wait: the check below says so at once.)
      const waiting = await waitForState(swapper, (s) => stageOf(s, 'swap').leaseWait !== undefined || s.status !== 'running');
      expect(stageOf(waiting, 'swap').leaseWait).toMatchObject({ key: `workspace.dir.inside@${harness.taskQueue}:${await realpath(parent)}`, holders: 1 });
      expect(harness.modelServer.requests().filter((r) => r.rule === 'swap')).toEqual([]);
      await holder.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });
      const [holderState, swapperState] = await Promise.all([harness.finish(holder), harness.finish(swapper)]);
      expect(holderState.status, JSON.stringify(holderState.error)).toBe('completed');
      expect(swapperState.status, JSON.stringify(swapperState.error)).toBe('completed');
      // Its agent started only once the run in the child had ended.
      const swapRequest = harness.modelServer.requests().find((r) => r.rule === 'swap')!;
      expect(Date.parse(swapRequest.time)).toBeGreaterThanOrEqual(stageOf(holderState, 'gate').finishedAt!);

      // The other way round: a run holds the parent, a run lent a folder inside it waits.
      const inner = path.join(parent, 'b');
      await mkdir(inner);
      const outer = await harness.start(await harness.writePipeline('holds-parent', holdingPipeline('holds-parent', parent)));
      await waitForWaiting(outer, 'gate', 'approval');
      const innerRun = await harness.start(await harness.writePipeline('waits-inside', `name: waits-inside\nworkspace: { dir: ${JSON.stringify(inner)} }\nstages:\n  - { id: write, backend: anthropic-api, model: haiku, contract: none, prompt: "fast run: write the notes." }\n`));
      const innerWaiting = await waitForState(innerRun, (s) => stageOf(s, 'write').leaseWait !== undefined || s.status !== 'running');
      expect(stageOf(innerWaiting, 'write').leaseWait).toMatchObject({ key: `workspace.dir:${await realpath(parent)}`, holders: 1 });
      expect(harness.modelServer.requests().filter((r) => r.rule === 'fast')).toEqual([]);
      await outer.executeUpdate(approveStageUpdate, { args: [{ stage: 'gate' }] });
      const [outerState, innerState] = await Promise.all([harness.finish(outer), harness.finish(innerRun)]);
      expect(outerState.status, JSON.stringify(outerState.error)).toBe('completed');
      expect(innerState.status, JSON.stringify(innerState.error)).toBe('completed');
      const fastRequest = harness.modelServer.requests().find((r) => r.rule === 'fast')!;
      expect(Date.parse(fastRequest.time)).toBeGreaterThanOrEqual(stageOf(outerState, 'gate').finishedAt!);
      expect(await readdir(away)).toEqual([]);
    }));
});
