import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { STAGE_MARKER } from '../../src/activities/process/sweep.js';
import { git, initRepo } from '../helpers/git-repo.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { commandLine, processesWith, REPORT, waitFor } from './claude-cli-world.js';
import { WorkerProcesses } from './fault-helpers.js';

/*
 * Issue 10 item 3: a worker killed with SIGKILL while its agent's Bash tool holds locks. The tool took a lock with an
 * EXIT trap (as pyenv's shim lock is taken on every Bash call) and git's index.lock (as a git killed mid-write leaves
 * it). The dead worker's watchdog sends SIGTERM first, so the trap runs and the first lock is gone; the stale
 * index.lock, which no trap can release, is removed before the next attempt starts, with a warning. The next
 * attempt's tool calls then find both locks free: no wait, and git works.
 *
 * The trap takes 3 s to release its lock, as a clean-up on a loaded machine can: the operator's grace is the tool's
 * to use. Had the CLI been told of its worker's death with SIGTERM rather than frozen, it would SIGKILL its tool about
 * a second later, whatever the grace, and the lock would stay (spawn-agent.ts).
 */

const TASK = 'Task: hold locks and get killed';

let harness: Harness;
let scratch: string;
let shimLock: string;
let pipelineFile: string;
const workers = new WorkerProcesses();

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'claude-cli-locks-'));
  shimLock = path.join(scratch, 'shims.lock');
  // The trap waits on a pipe nobody writes to: a wait in the shell itself, with no child for a stop to signal.
  const slowRelease = path.join(scratch, 'slow-release.fifo');
  await execa('mkfifo', ['--', slowRelease]);
  const repo = path.join(scratch, 'repo');
  await initRepo(repo, { 'README.md': '# Project\n' });
  // The check the next attempt runs: pyenv would wait 60 s on its lock; here a lock still there is named at once.
  const check = `if [ -e "${shimLock}" ]; then echo SHIM-LOCK-STILL-THERE; else echo SHIM-LOCK-FREE; fi; git add -A && echo GIT-ADD-OK`;
  harness = await createHarness('claude-cli-locks', {
    worker: false,
    // Unsandboxed: the tool takes a lock outside the workspace (as pyenv does in ~/.pyenv) and git's index.lock in the
    // repository's own .git, both of which Claude Code's sandbox refuses to write (docs/security.md).
    // A long grace: the tool exits as soon as its trap has run, and on a machine at load 30 that took over 5 s once.
    env: { AGENT_PIPELINE_KILL_GRACE: '20s', AGENT_PIPELINE_SANDBOX: 'off' },
    scenario: {
      rules: [
        {
          name: 'locks',
          match: TASK,
          repeatLastTurn: true,
          turns: [
            { text: 'First step.', tool: { name: 'Bash', input: { command: 'echo one > first.txt' } } },
            {
              text: 'A long step holding locks.',
              tool: {
                name: 'Bash',
                input: {
                  // Once in its clean-up the shell ignores SIGTERM (and so does the rm it starts), as one that must
                  // finish it does; a SIGKILL still ends it.
                  command: `trap 'trap "" TERM; read -t 3 <> "${slowRelease}"; rm -f "${shimLock}"' EXIT; touch "${shimLock}"; touch "$(git rev-parse --git-path index.lock)"; echo holding; sleep 300`,
                },
              },
            },
            // Twice: the CLI's resumed conversation may count the interrupted turn as one or two assistant messages.
            { text: 'Checking the locks.', tool: { name: 'Bash', input: { command: check } } },
            { text: 'Checking the locks.', tool: { name: 'Bash', input: { command: check } } },
            { text: `Resumed and finished.\n${REPORT}` },
          ],
        },
      ],
    },
  });
  pipelineFile = path.join(scratch, 'pipeline.yaml');
  await writeFile(
    pipelineFile,
    [
      'name: locks-test',
      'workspace: { repo: repo }',
      'defaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 5s, retries: 2, permissionMode: dontAsk }',
      'stages:',
      '  - id: build',
      `    prompt: "${TASK}"`,
      '    allowedTools: [Bash]',
      '    commit: true',
      '',
    ].join('\n'),
  );
});

afterAll(async () => {
  await workers.killAll();
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const agentProcesses = (): Promise<number[]> => processesWith(STAGE_MARKER, harness.workspacesRoot, 'prefix');

/** The attempt whose agent holds the stage, from the stage's lock file in the run's bookkeeping folder. */
async function lockingAttempt(runId: string): Promise<number> {
  const bookkeeping = harness.runBookkeeping(runId);
  const lock = (await readdir(bookkeeping, { recursive: true })).find((entry) => path.basename(entry) === 'agent.lock');
  if (!lock) throw new Error(`no agent.lock under ${bookkeeping}`);
  return (JSON.parse(await readFile(path.join(bookkeeping, lock), 'utf8')) as { attempt: number }).attempt;
}

describe('a worker killed while its agent holds locks', () => {
  test('the tool releases its lock on SIGTERM, the stale index.lock is removed, and the retry finds both free', { timeout: 240_000 }, async () => {
    const first = workers.start(harness.env);
    const handle = await harness.start(pipelineFile);
    await waitFor(
      async () => (await Promise.all((await agentProcesses()).map(commandLine))).some((c) => c.includes('sleep 300')),
      Boolean,
      'the agent to hold the locks in a Bash tool',
      90_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nworker output: ${workers.output()}`);
    });
    const worktree = harness.runDir(handle.workflowId);
    const indexLock = await git(worktree, 'rev-parse', '--path-format=absolute', '--git-path', 'index.lock');
    await waitFor(() => existsSync(shimLock) && existsSync(indexLock), Boolean, 'both locks to be taken', 10_000);
    // Usually the first; on a loaded machine an earlier attempt may have failed before it took the locks.
    const killedAttempt = await lockingAttempt(handle.workflowId);

    first.kill('SIGKILL');
    await first;
    // The watchdog's SIGTERM lets the shell run its EXIT trap, the CLI frozen meanwhile; SIGKILL would have left the
    // lock behind.
    await waitFor(agentProcesses, (pids) => pids.length === 0, 'the agent and its tool to be gone', 45_000);
    expect(existsSync(shimLock)).toBe(false);
    // Nothing can release git's lock but the next attempt.
    expect(existsSync(indexLock)).toBe(true);

    void workers.start(harness.env);
    const state = await harness.finish(handle);
    // What ended an attempt the test did not plan is in the workers' output and the requests the model saw.
    const explain = () => `worker output: ${workers.output()}\nmodel requests: ${harness.modelServer.requests().map((r) => `${r.rule ?? '-'}#${r.turn ?? '-'} ${r.status}`).join(', ')}`;
    expect(state.status, explain()).toBe('completed');
    const stage = state.stages[0];
    expect(stage, explain()).toMatchObject({ status: 'completed', attempt: killedAttempt + 1 });
    expect(stage.result?.warnings?.some((w) => w.includes('removed a stale') && w.includes('index.lock'))).toBe(true);
    expect(stage.result?.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(existsSync(indexLock)).toBe(false);

    // The tool output of the check, as the model got it in the next request.
    const bodies = harness.modelServer.requests().filter((r) => r.rule === 'locks').map((r) => JSON.stringify(r.body));
    // The tool's output (not the command, which names both words) as the model got it.
    const seen = bodies.find((body) => /SHIM-LOCK-(FREE|STILL-THERE)\\n/.test(body));
    expect(seen).toContain('SHIM-LOCK-FREE');
    expect(seen).toContain('GIT-ADD-OK');
  });
});
