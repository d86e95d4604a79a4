import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { parseJson, runCli, runCliCommands } from './cli-helpers.js';
import { expectNoStageLeftRunning, stageOf, waitForWaiting } from './workflow-helpers.js';

/*
 * Issue 33, item 7: the worker kept a run's bookkeeping in `<run folder>/.agent-pipeline/`, inside the tree its agent
 * writes. A sandboxed agent replaced `.agent-pipeline/stages/s2` with a symlink to a folder outside, and the next
 * stage's attempt wrote its 0600 settings file, a transcript of agent-chosen text and a baseline there; an agent that
 * rewrote `run.json`/`ended.json` decided what `prune` deleted. With the real `claude`, the real bubblewrap, the
 * scripted model, the real worker and the real `prune`: the bookkeeping lives in the workers' own folder, nothing is
 * written through what the agent planted, and `prune` decides from that folder only.
 */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;
const bash = (command: string) => ({ tool: { name: 'Bash', input: { command, description: 'plant' } } });
const HEADER = (name: string): string => `name: ${name}\ndefaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 30s, stallTimeout: 2m }\nstages:\n`;

const suffix = Math.random().toString(36).slice(2, 8);
/** A run that ends before the forgery, whose id the live run's agent writes into its own records. */
const ENDED_ID = `ended-${suffix}`;
/** The live run: it waits for a person after its agent forged its records. */
const LIVE_ID = `live-${suffix}`;
/** A run that ends after its agent wrote records naming the live run. */
const CLAIMING_ID = `claiming-${suffix}`;

let harness: Harness;
let scratch: string;
let outside: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'bookkeeping-trust-'));
  outside = await mkdtemp(path.join(tmpdir(), 'bookkeeping-trust-outside-'));
  const forged = (runId: string): string => JSON.stringify({ runId, status: 'completed', endedAt: 1, pushed: true });
  harness = await createHarness('bookkeeping-trust', {
    env: { AGENT_PIPELINE_SANDBOX: MISSING_SANDBOX_PACKAGES.length > 0 ? 'off' : 'required' },
    scenario: {
      rules: [
        // Its Bash, sandboxed, makes the next stage's bookkeeping folder a symlink to a folder outside.
        { name: 'plant', match: 'Pipeline: planted-links · Stage: s1 ·', turns: [bash(`mkdir -p .agent-pipeline/stages && rm -rf .agent-pipeline/stages/s2 && ln -s '${outside}' .agent-pipeline/stages/s2 && ls -la .agent-pipeline/stages`), { text: report('Planted.') }] },
        { name: 'work', match: 'Pipeline: planted-links · Stage: s2 ·', turns: [bash('echo done > done.txt'), { text: report('Worked.') }] },
        { name: 'plain', match: 'Pipeline: plain ·', turns: [bash('echo ended > ended.txt'), { text: report('Ended.') }] },
        { name: 'ended', match: 'Pipeline: ended-early ·', turns: [{ text: report('Ended.') }] },
        // The live run's records say it is the ended run, and that it ended long ago.
        { name: 'forge', match: 'Pipeline: forged-records ·', turns: [bash(`mkdir -p .agent-pipeline && echo '{"runId":"${ENDED_ID}"}' > .agent-pipeline/run.json && echo '${forged(ENDED_ID)}' > .agent-pipeline/ended.json && echo work > work.txt`), { text: report('Forged.') }] },
        // An ended run's records claim it is the live run.
        { name: 'claim', match: 'Pipeline: claiming-records ·', turns: [bash(`mkdir -p .agent-pipeline && echo '{"runId":"${LIVE_ID}"}' > .agent-pipeline/run.json`), { text: report('Claimed.') }] },
      ],
    },
  });
}, 60_000);

afterAll(async () => {
  await harness?.client.workflow.getHandle(LIVE_ID).terminate('test over').catch(() => undefined);
  await harness?.close();
  for (const dir of [scratch, outside]) if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the worker\'s bookkeeping, out of the agents\' tree', () => {
  test('a symlink the sandboxed agent planted at .agent-pipeline/stages/s2 in its tree receives nothing of the next stage', { timeout: 180_000 }, async () => {
    const yaml = `${HEADER('planted-links')}  - id: s1\n    prompt: Plant.\n    allowedTools: [Bash]\n  - id: s2\n    needs: [s1]\n    prompt: Work.\n    allowedTools: [Bash]\n`;
    const state = await harness.finish(await harness.startYaml('planted-links', yaml));
    expectNoStageLeftRunning(state);
    expect(state.status, JSON.stringify(state.stages)).toBe('completed');
    const workspace = state.workspace!;
    // No settings file, transcript or baseline of s2 reached the folder the plant leads to.
    expect(await readdir(outside)).toEqual([]);
    // The plant is there, in the agent's tree, as the agent left it.
    expect((await lstat(path.join(workspace, '.agent-pipeline', 'stages', 's2'))).isSymbolicLink()).toBe(true);
    // They are in the run's bookkeeping, in the workers' own folder.
    const s2 = path.join(harness.runBookkeeping(state.runId), 'stages', 's2');
    expect((await lstat(s2)).isDirectory()).toBe(true);
    expect(await readdir(s2)).toEqual(expect.arrayContaining(['settings.json']));
    const [execution] = (await readdir(s2, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(await readdir(path.join(s2, execution))).toEqual(expect.arrayContaining(['attempt-1.jsonl', 'baseline.json']));
    expect(stageOf(state, 's2').result?.transcript).toBe(path.relative(harness.workspacesRoot, path.join(s2, execution, 'attempt-1.jsonl')));
  });

  test('records an agent writes in its tree neither make prune delete a live run nor keep an ended one', { timeout: 240_000 }, async () => {
    // The ended run's agent writes nothing (the API backend spares a `claude` run): what prune sees of it is its folder
    // and bookkeeping, which every run has.
    const ended = await harness.finish(await harness.startYaml('ended-early', `${HEADER('ended-early')}  - id: s1\n    backend: anthropic-api\n    prompt: End.\n`, ENDED_ID));
    expect(ended.status).toBe('completed');
    const live = await harness.startYaml('forged-records', `${HEADER('forged-records')}  - id: s1\n    prompt: Forge.\n    allowedTools: [Bash]\n    approval: true\n`, LIVE_ID);
    await waitForWaiting(live, 's1');
    const claiming = await harness.finish(await harness.startYaml('claiming-records', `${HEADER('claiming-records')}  - id: s1\n    prompt: Claim.\n    allowedTools: [Bash]\n`, CLAIMING_ID));
    expect(claiming.status).toBe('completed');
    // The forgeries are in place, and the ended runs' folders and bookkeeping are there to remove.
    expect(existsSync(path.join(harness.runDir(LIVE_ID), '.agent-pipeline', 'ended.json'))).toBe(true);
    expect(existsSync(path.join(harness.runDir(CLAIMING_ID), '.agent-pipeline', 'run.json'))).toBe(true);
    for (const runId of [ENDED_ID, CLAIMING_ID]) expect(existsSync(harness.runDir(runId)) && existsSync(harness.runBookkeeping(runId)), runId).toBe(true);

    // Asked of Temporal, then not: back to back in one process through the CLI's entry, each with its own argv, output
    // and exit code (a process each cost half a CPU second). What either removed stays removed, so the live run's
    // folder found after both was kept by each.
    const commands = [['prune', '--older-than', '1ms', '--json'], ['prune', '--force', '--older-than', '1ms', '--json']];
    const results = await runCliCommands(commands, harness.env);
    for (const [i, pruned] of results.entries()) {
      expect(pruned.exitCode, pruned.all).toBe(0);
      const entries = parseJson<{ runId: string; removed: boolean }[]>(pruned);
      expect(entries.find((e) => e.runId === LIVE_ID)?.removed ?? false, `${commands[i].join(' ')} removed the live run: ${pruned.stdout}`).toBe(false);
    }
    // The live run keeps its folder and its work.
    expect(existsSync(path.join(harness.runDir(LIVE_ID), 'work.txt')), `prune deleted the live run: ${results.map((r) => r.stdout).join('\n')}`).toBe(true);
    expect(existsSync(harness.runBookkeeping(LIVE_ID))).toBe(true);
    // The ended runs went, their bookkeeping with them; the claim in its tree kept nothing.
    for (const runId of [ENDED_ID, CLAIMING_ID]) {
      expect(existsSync(harness.runDir(runId)), runId).toBe(false);
      expect(existsSync(harness.runBookkeeping(runId)), runId).toBe(false);
    }
    expect(existsSync(path.join(harness.workspacesRoot, '.agent-pipeline', 'runs'))).toBe(true);
  });

  test('logs reads transcripts from the workers\' own folder, and from a run\'s old in-tree folder only as real files', { timeout: 180_000 }, async () => {
    const runId = `old-${suffix}`;
    const state = await harness.finish(await harness.startYaml('plain', `${HEADER('plain')}  - id: s1\n    prompt: End.\n    allowedTools: [Bash]\n`, runId));
    expect(state.status).toBe('completed');
    const logs = await runCli(['logs', runId, '--stage', 's1'], harness.env);
    expect(logs.exitCode, logs.all).toBe(0);
    expect(logs.stdout).toContain('Ended.');

    // As a run that ended before the bookkeeping moved out of run folders left it: inside its tree.
    const old = path.join(harness.runDir(runId), '.agent-pipeline');
    await rename(harness.runBookkeeping(runId), old);
    const fromTree = await runCli(['logs', runId, '--stage', 's1'], harness.env);
    expect(fromTree.exitCode, fromTree.all).toBe(0);
    expect(fromTree.stdout).toContain('Ended.');

    // Its agent could have made a transcript a symlink to any file the reader may read: it is not followed.
    const secret = path.join(scratch, 'secret.jsonl');
    await writeFile(secret, `${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: 'SECRET-b41f' }] } })}\n`);
    const [execution] = await readdir(path.join(old, 'stages', 's1'));
    await rm(path.join(old, 'stages', 's1', execution, 'attempt-1.jsonl'));
    await symlink(secret, path.join(old, 'stages', 's1', execution, 'attempt-1.jsonl'));
    const linked = await runCli(['logs', runId, '--stage', 's1', '--raw'], harness.env);
    expect(linked.all).not.toContain('SECRET-b41f');
    expect(linked.exitCode).toBe(2);
    expect(linked.stderr).toContain('TRANSCRIPT_NOT_FOUND');
  });
});
