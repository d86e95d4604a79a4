import { execa } from 'execa';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PrewarmTarget } from '../../src/activities/backends/stage-backend.js';
import type { WarmLaunch } from '../../src/activities/backends/claude-cli/warm-pool.js';
import { runCliProcess } from '../../src/activities/backends/claude-cli/agent-process.js';
import { agentEnvironment, streamJsonPrompt } from '../../src/activities/backends/claude-cli/args.js';
import { findClaudeBinary } from '../../src/activities/backends/claude-cli/claude-binary.js';
import { CliEventReader } from '../../src/activities/backends/claude-cli/events.js';
import { spawnAgent } from '../../src/activities/backends/claude-cli/spawn-agent.js';
import { TranscriptWriter } from '../../src/activities/backends/claude-cli/transcript-writer.js';
import { loadModelCatalog } from '../../src/activities/backends/models.js';
import { workerMarkerValue } from '../../src/activities/process/orphan-watchdog.js';
import { readProcStat } from '../../src/activities/process/proc.js';
import { isGone } from '../../src/activities/process/stop.js';
import { STAGE_MARKER, WORKER_MARKER } from '../../src/activities/process/sweep.js';
import type { StageDefinition } from '../../src/pipeline/stage-schema.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { commandLine, createCliWorld, KILL_GRACE_MS, processesWith, REPORT, stageProcesses, waitFor, warmPool, type AttemptSetup, type CliWorld } from './claude-cli-world.js';

/*
 * Warm start with the real `claude`: an attempt starts the next stage's agent while it works; that stage's attempt
 * adopts it when everything matches, and stops it when the command line or a start-up file changed meanwhile.
 */

let world: CliWorld;

beforeAll(async () => {
  world = await createCliWorld({
    rules: [
      { match: 'Task: first', turns: [{ text: `First done.\n${REPORT}` }], repeatLastTurn: true },
      { match: 'Task: next', turns: [{ text: `Next done.\n${REPORT}` }], repeatLastTurn: true },
    ],
  });
});
afterAll(async () => {
  await world?.close();
});

const TOOLS = ['Bash', 'Edit', 'Write', 'Read'];
/** The `next` stage exactly as the harness will resolve it for its own attempt. */
function nextStage(overrides: Partial<StageDefinition> = {}) {
  const definition: StageDefinition = { id: 'next', prompt: 'unused', allowedTools: TOOLS, ...overrides };
  return resolveStage({ name: 'test', stages: [definition] }, definition);
}

/** Runs `first` with a hint for `next`, and returns the stage folder of next, whose agent its attempt started. */
async function firstWithHint(runId: string, target: PrewarmTarget, options: AttemptSetup['options'] = {}): Promise<string> {
  const first = await world.start({ task: 'Task: first', runId, stage: { id: 'first' }, options, request: { prewarm: async () => [target] } });
  expect((await first.outcome).warmStart).toBe(false);
  const nextDir = path.join(path.dirname(first.stageDir), 'next');
  return nextDir;
}

/**
 * Starts next's agent as the attempt of `first` does (firstWithHint) without running `first`: for the tests of what
 * becomes of a waiting agent, to which first's own agent added nothing but a `claude` start (about 1 CPU-s, issue 32).
 * The first test and those about the attempt itself (its rework, the agent limit, no pool) run `first`.
 */
async function warmNext(runId: string, target: PrewarmTarget, options: AttemptSetup['options'] = {}): Promise<string> {
  const { keys, workspace } = await world.prewarm(runId, [target], options);
  expect(keys).toHaveLength(1);
  return workspace.stageDir('next');
}

describe('warm start', () => {
  test('the next stage adopts the agent started for it, and answers through it', async () => {
    const nextDir = await firstWithHint('run-adopt', { stage: nextStage(), system: 'You are a test agent.' });
    const [waiting] = await waitFor(() => stageProcesses(nextDir), (pids) => pids.length > 0, 'the warm agent of stage next');
    // Longer than the 3 s the CLI waits for plain stdin: a waiting agent reads stream-json, which has no such limit.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    const next = await world.start({ task: 'Task: next', runId: 'run-adopt', stage: { id: 'next' } });
    const outcome = await next.outcome;
    expect(outcome).toMatchObject({ warmStart: true, warnings: [] });
    expect(outcome.text).toContain('Next done.');
    // The adopted process is the one that waited, and it is gone with the attempt.
    expect(next.heartbeats.length).toBeGreaterThan(0);
    expect(await stageProcesses(nextDir)).not.toContain(waiting);
    expect(await stageProcesses(nextDir)).toEqual([]);
  });

  test('a waiting agent whose command line differs is stopped, and the stage starts cold', async () => {
    const nextDir = await warmNext('run-args', { stage: nextStage({ allowedTools: ['Read'] }), system: 'You are a test agent.' });
    const [waiting] = await waitFor(() => stageProcesses(nextDir), (pids) => pids.length > 0, 'the warm agent of stage next');
    const outcome = await (await world.start({ task: 'Task: next', runId: 'run-args', stage: { id: 'next' } })).outcome;
    expect(outcome.warmStart).toBe(false);
    expect(outcome.warnings).toEqual([expect.stringMatching(/was waiting for this stage, but its command line differs .*--allowedTools=Read.*started cold/)]);
    expect(outcome.text).toContain('Next done.');
    expect(await stageProcesses(nextDir)).not.toContain(waiting);
  });

  test('a waiting agent is stopped when CLAUDE.md changed after it started, since it read the old one', async () => {
    const nextDir = await warmNext('run-memory', { stage: nextStage(), system: 'You are a test agent.' });
    await waitFor(() => stageProcesses(nextDir), (pids) => pids.length > 0, 'the warm agent of stage next');
    await writeFile(path.join(world.root, toFolderName('run-memory'), 'CLAUDE.md'), 'A rule a running stage just wrote.\n');
    const outcome = await (await world.start({ task: 'Task: next', runId: 'run-memory', stage: { id: 'next' } })).outcome;
    expect(outcome.warmStart).toBe(false);
    expect(outcome.warnings).toEqual([expect.stringContaining(`${path.join(world.root, toFolderName('run-memory'), 'CLAUDE.md')} changed after it started`)]);
    // The cold agent read the new CLAUDE.md.
    expect(JSON.stringify(world.server.requests().at(-1)?.body)).toContain('A rule a running stage just wrote.');
  });

  test('a stage that resumes a session (a rework round) stops the agent waiting for it and starts cold on plain text', async () => {
    // The waiting agent reads stream-json, a resumed attempt cannot adopt it (`--resume` differs from its
    // `--session-id`): the cold start must not keep `--input-format stream-json` while it writes plain text.
    const first = await world.start({ task: 'Task: first', runId: 'run-rework', stage: { id: 'first' }, request: { prewarm: async () => [{ stage: nextStage(), system: 'You are a test agent.' }] } });
    const firstOutcome = await first.outcome;
    const nextDir = path.join(path.dirname(first.stageDir), 'next');
    const [waiting] = await waitFor(() => stageProcesses(nextDir), (pids) => pids.length > 0, 'the warm agent of stage next');
    const continuation = { kind: 'rework' as const, sessionId: firstOutcome.sessionId, message: 'The review asks for one more change.' };
    const next = await world.start({ task: 'Task: next', runId: 'run-rework', stage: { id: 'next' }, request: { continuation } });
    const outcome = await next.outcome;
    expect(outcome.warmStart).toBe(false);
    expect(outcome.sessionId).toBe(firstOutcome.sessionId);
    expect(outcome.warnings).toEqual([expect.stringMatching(/was waiting for this stage, but .*started cold/)]);
    expect(await stageProcesses(nextDir)).not.toContain(waiting);
  });

  test('a waiting agent whose stage started on another worker goes within seconds, not at its TTL', async () => {
    const nextDir = await warmNext('run-elsewhere', { stage: nextStage(), system: 'You are a test agent.' });
    const [waiting] = await waitFor(() => stageProcesses(nextDir), (pids) => pids.length > 0, 'the warm agent of stage next');
    // Another worker (its own pool, which has nothing waiting) runs the stage cold in the shared workspace.
    const outcome = await (await world.start({ task: 'Task: next', runId: 'run-elsewhere', stage: { id: 'next' }, options: { warmPool: warmPool() } })).outcome;
    expect(outcome.warmStart).toBe(false);
    const started = Date.now();
    await waitFor(() => stageProcesses(nextDir), (pids) => !pids.includes(waiting), 'the warm agent to go', 15_000);
    // The pool checks every second and stops it like any agent (SIGTERM, then SIGKILL after the kill grace).
    expect(Date.now() - started).toBeLessThan(1_000 + KILL_GRACE_MS + 3_000);
  });

  test('waiting agents count against the agent limit, go after their TTL, and none start without a pool (warm start off)', async () => {
    const ttl = await warmNext('run-ttl', { stage: nextStage(), system: 'You are a test agent.' }, { warmPool: warmPool({ ttlMs: 15_000 }) });
    await waitFor(() => stageProcesses(ttl), (pids) => pids.length > 0, 'the warm agent of run-ttl');
    // The other two runs take their turn while the TTL runs out, rather than before it starts.
    const atLimit = await firstWithHint('run-limit', { stage: nextStage(), system: 'You are a test agent.' }, { warmPool: warmPool({ limit: 1 }) });
    const off = await firstWithHint('run-off', { stage: nextStage(), system: 'You are a test agent.' }, { warmPool: undefined });
    await waitFor(() => stageProcesses(ttl), (pids) => pids.length === 0, 'the warm agent to go after its TTL', 30_000);
    expect(await stageProcesses(atLimit)).toEqual([]);
    expect(await stageProcesses(off)).toEqual([]);
  });
});

/** The waiting `claude` itself (the worker's child), not a tool or helper it started. */
async function warmAgentPid(stageDir: string): Promise<number> {
  // A helper the agent started (its `npm root -g`) may be gone between the listing and this read: not the agent.
  const parentOf = (pid: number): number | undefined => {
    const ppid = readProcStat(pid)?.[1];
    return ppid === undefined ? undefined : Number(ppid);
  };
  const [pid] = await waitFor(() => stageProcesses(stageDir).then((pids) => pids.filter((p) => parentOf(p) === process.pid)), (pids) => pids.length === 1, 'the warm agent');
  return pid;
}

/** Waits, without giving the event loop a turn, until the kernel has the process as a zombie: Node has not seen it exit yet. */
function waitForZombie(pid: number): void {
  const deadline = Date.now() + 10_000;
  while (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z') {
    if (Date.now() > deadline) throw new Error(`process ${pid} did not die`);
  }
}

describe('a warm agent that is dead or dying', () => {
  test('is not adopted when it died before the attempt took it, even before Node saw it exit', async () => {
    const pool = warmPool();
    try {
      const nextDir = await warmNext('run-dead', { stage: nextStage(), system: 'You are a test agent.' }, { warmPool: pool });
      const pid = await warmAgentPid(nextDir);
      // How the waiting agent was started, so that the take below matches it in everything but its state.
      const [[key, launch]] = [...(pool as unknown as { entries: Map<string, WarmLaunch> }).entries];
      process.kill(pid, 'SIGKILL');
      waitForZombie(pid);
      const took = await pool.take(key, { binary: launch.binary, args: launch.args, cwd: launch.cwd, env: launch.env });
      expect(took.kind === 'discarded' ? took.reason : took.kind).toBe('it had exited');
    } finally {
      await pool.stopAll();
    }
  });

  test('being stopped as the attempt takes it over is stopped before the attempt starts its own agent, which has its marker', async () => {
    const pool = warmPool();
    try {
      const nextDir = await warmNext('run-stopping', { stage: nextStage(), system: 'You are a test agent.' }, { warmPool: pool });
      const pid = await warmAgentPid(nextDir);
      const [[key, launch]] = [...(pool as unknown as { entries: Map<string, WarmLaunch & { marker: string }> }).entries];
      // Frozen, it outlives SIGTERM: its stop lasts the whole kill grace.
      process.kill(pid, 'SIGSTOP');
      const stopping = pool.discardAll([key]);
      // The attempt looked before the stop (its TTL, its stage started elsewhere) and takes over now.
      const took = await pool.take(key, { binary: launch.binary, args: launch.args, cwd: launch.cwd, env: launch.env });
      expect(took.kind).toBe('none');
      // Its own agent, about to start, carries this marker: the stop, which hunts it, is over.
      expect(await processesWith(STAGE_MARKER, launch.marker)).toEqual([]);
      await stopping;
    } finally {
      await pool.stopAll();
    }
  });

  test('that dies after it was adopted, before it read its prompt, is replaced once by a cold agent', async () => {
    const nextDir = await warmNext('run-dying', { stage: nextStage(), system: 'You are a test agent.' });
    const pid = await warmAgentPid(nextDir);
    const warmSession = /--session-id (\S+)/.exec(await commandLine(pid))?.[1];
    // Frozen, it is alive when the attempt adopts it and writes the prompt, which it never reads: it dies first.
    process.kill(pid, 'SIGSTOP');
    const next = await world.start({ task: 'Task: next', runId: 'run-dying', stage: { id: 'next' } });
    const lockedBy = async (): Promise<number | undefined> => ((JSON.parse(await readFile(path.join(nextDir, 'agent.lock'), 'utf8').catch(() => '{}')) as { pid?: number }).pid);
    await waitFor(lockedBy, (locked) => locked === pid, 'the attempt to adopt the frozen agent');
    process.kill(pid, 'SIGKILL');
    const outcome = await next.outcome;
    expect(outcome.warmStart).toBe(false);
    expect(outcome.warnings).toEqual([expect.stringMatching(/^the agent started ahead of time for this stage was killed by SIGKILL before it read its prompt; the stage started cold instead$/)]);
    expect(outcome.text).toContain('Next done.');
    // The cold agent ran in a session of its own.
    expect(warmSession).toMatch(/^[0-9a-f-]{36}$/);
    expect(outcome.sessionId).not.toBe(warmSession);
    expect(await stageProcesses(nextDir)).toEqual([]);
  });
});

describe('an adopted agent that answers at once', () => {
  test('has its whole answer read, also when it answered and exited before the attempt had written its lock', async () => {
    const dir = await mkdtemp(path.join(world.root, 'answers-at-once-'));
    const sessionId = randomUUID();
    const args = ['-p', '--output-format', 'stream-json', '--verbose', `--session-id=${sessionId}`, '--permission-mode', 'dontAsk', '--model=sonnet', '--input-format', 'stream-json'];
    const marker = `${dir}#${sessionId}`;
    const env = agentEnvironment(world.env, path.join(dir, 'claude'), { stage: marker, worker: workerMarkerValue(KILL_GRACE_MS) });
    const binary = (await findClaudeBinary(world.env))!;
    const waiting = spawnAgent({ binary, args, cwd: dir, env });
    waiting.catch(() => undefined);
    // As in the pool: nobody reads a waiting agent's output, so execa (`buffer: false`) has set it flowing by adoption.
    await waitFor(() => waiting.stdout?.readableFlowing, (flowing) => flowing === true, "the waiting agent's output to flow");
    const transcriptPath = path.join(dir, 'attempt-1.jsonl');
    const transcript = await TranscriptWriter.open(transcriptPath, []);
    const reader = new CliEventReader(sessionId, loadModelCatalog(world.env), () => undefined);
    const run = await runCliProcess({
      binary, args, cwd: dir, env, spawned: waiting, stdin: streamJsonPrompt('Task: next'), reader, transcript,
      stallTimeoutMs: 60_000, firstOutputTimeoutMs: 60_000, killGraceMs: KILL_GRACE_MS, marker: { name: STAGE_MARKER, value: marker },
      heartbeatIntervalMs: 60_000, signal: new AbortController().signal, heartbeat: () => {},
      // The lock file, written on a loaded machine: the agent has answered and exited before it is there.
      onSpawn: async (pid) => void (await waitFor(() => isGone(pid), (gone) => gone, 'the agent to answer and exit')),
    });
    await transcript.close();
    expect(run.exitCode).toBe(0);
    expect(reader.result?.result ?? 'no result event').toContain('Next done.');
    expect(run.stdoutBytes).toBeGreaterThan(0);
    expect(await readFile(transcriptPath, 'utf8')).toContain('Next done.');
  });
});

describe('a worker killed while agents wait for their stages', () => {
  test('leaves none of them behind: the watchdog stops them', async () => {
    // A worker process of its own (the built backend), so that it can be killed outright.
    const script = `
      const { prewarmStages } = await import(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/activities/backends/claude-cli/warm-start.js'))});
      const { WarmPool } = await import(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/activities/backends/claude-cli/warm-pool.js'))});
      const { openRunWorkspace } = await import(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/activities/workspace/run-workspace.js'))});
      const { workerMarkerValue } = await import(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/activities/process/orphan-watchdog.js'))});
      const { findClaudeBinary } = await import(${JSON.stringify(path.join(PROJECT_ROOT, 'dist/activities/backends/claude-cli/claude-binary.js'))});
      const stage = (id) => ({ id, prompt: 'x', needs: [], backend: 'claude-cli', model: 'sonnet', allowedTools: ['Read'] });
      const workspace = await openRunWorkspace(process.argv[1], { runId: 'run-killed' });
      const pool = new WarmPool({ ttlMs: 120000, killGraceMs: 2000, limit: 8 });
      await prewarmStages(pool, [{ stage: stage('a'), system: 's' }, { stage: stage('b'), system: 's' }], { binary: await findClaudeBinary(process.env), workerEnv: process.env, workspace, sandbox: { mode: 'auto' } });
      console.log('marker ' + workerMarkerValue() + ' waiting ' + pool.size);
      setInterval(() => {}, 1000);
    `;
    const worker = execa('node', ['--input-type=module', '-e', script, world.root], { env: { ...process.env, ...world.env }, reject: false });
    let output = '';
    worker.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [, marker, waiting] = (await waitFor(() => /marker (\S+) waiting (\d+)/.exec(output), (m) => m !== null, 'the worker to start its waiting agents'))!;
    expect(Number(waiting)).toBe(2);
    await waitFor(() => processesWith(WORKER_MARKER, marker), (pids) => pids.length >= 2, 'the waiting agents');
    worker.kill('SIGKILL');
    await worker;
    await waitFor(() => processesWith(WORKER_MARKER, marker), (pids) => pids.length === 0, 'no waiting agent to be left', 30_000);
  });
});
