import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { WORKER_MARKER } from '../../src/activities/process/sweep.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { isGone, stopMarkedProcesses } from '../../src/activities/process/stop.js';
import { findMarkedProcesses } from '../../src/activities/process/sweep.js';
import { waitFor } from '../integration/claude-cli-world.js';

/*
 * Stopping real processes: SIGTERM first (a shell runs its EXIT trap and releases its lock), SIGKILL after the grace
 * only for what ignores SIGTERM, and no wait at all when nothing is there to stop.
 */

const MARKER = 'AGENT_PIPELINE_TEST_STOP';
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'process-stop-'));
});
afterAll(async () => {
  for (const child of children) if (child.pid && !isGone(child.pid)) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** A shell in its own session (like a Bash tool of the CLI), marked `MARKER=value`. */
function shell(script: string, value: string): ChildProcess {
  const child = spawn('bash', ['-c', script], { detached: true, stdio: 'ignore', env: { PATH: process.env.PATH, [MARKER]: value } });
  children.push(child);
  return child;
}

describe.runIf(process.platform === 'linux')('stopping processes gracefully', () => {
  test('SIGTERM lets a tool run its EXIT trap and release its lock; nothing needs SIGKILL', async () => {
    const lock = path.join(dir, 'shim.lock');
    shell(`trap 'rm -f "${lock}"' EXIT; touch "${lock}"; sleep 300`, 'trap');
    await waitFor(() => existsSync(lock), Boolean, 'the tool to take its lock', 10_000);
    await waitFor(() => findMarkedProcesses(MARKER, 'trap'), (pids) => pids.length === 2, 'bash and its sleep', 10_000);
    const marked = await findMarkedProcesses(MARKER, 'trap');
    const report = await stopMarkedProcesses(MARKER, 'trap', 'exact', 10_000);
    expect(existsSync(lock)).toBe(false);
    expect(report.stopped.length).toBeGreaterThanOrEqual(1);
    expect(report.killed).toEqual([]);
    expect(report.survivors).toEqual([]);
    expect(marked.filter((pid) => !isGone(pid))).toEqual([]);
  });

  test('a process that runs another program after its SIGTERM gets SIGTERM again, not SIGKILL after the grace', async () => {
    // As a shell's child that gets SIGTERM between its fork and its exec: the program it then runs never saw the
    // signal. Here the shell execs `sleep` on SIGTERM (waiting in a builtin, it runs the trap at once).
    const fifo = path.join(dir, 'exec-fifo');
    const ready = path.join(dir, 'exec-ready');
    const child = shell(`trap 'exec sleep 300' TERM; mkfifo "${fifo}"; exec 3<>"${fifo}"; touch "${ready}"; read -u 3 -t 300`, 'exec');
    await waitFor(() => existsSync(ready), Boolean, 'the shell to wait in read', 10_000);
    const report = await stopMarkedProcesses(MARKER, 'exec', 'exact', 5_000);
    expect(report.stopped).toContain(child.pid);
    expect(report.killed).toEqual([]);
    expect(report.survivors).toEqual([]);
    expect(await findMarkedProcesses(MARKER, 'exec')).toEqual([]);
  });

  test('leaves go first: a parent gets SIGTERM only once its children have gone, so it is never stopped mid clean-up', async () => {
    // The shell records every SIGTERM it gets; with its child stopped first it ends on its own and records none.
    const log = path.join(dir, 'parent-signals.log');
    shell(`trap 'echo TERM >> "${log}"' TERM; sleep 300; echo done >> "${log}"`, 'leaves');
    await waitFor(() => findMarkedProcesses(MARKER, 'leaves'), (pids) => pids.length === 2, 'bash and its sleep', 10_000);
    const [parent] = (await findMarkedProcesses(MARKER, 'leaves')).sort((a, b) => a - b);
    const report = await stopMarkedProcesses(MARKER, 'leaves', 'exact', 10_000);
    expect(report.stopped).not.toContain(parent);
    expect(report.killed).toEqual([]);
    expect(await readFile(log, 'utf8')).toBe('done\n');
  });

  test('what ignores SIGTERM gets SIGKILL once the grace is over', async () => {
    // An ignored signal stays ignored across exec, so the sleeps ignore SIGTERM too.
    // The ready file is written after the trap is set: a SIGTERM before it would end the shell on a loaded machine.
    const ready = path.join(dir, 'stubborn-ready');
    const child = shell(`trap '' TERM; touch "${ready}"; while :; do sleep 1; done`, 'stubborn');
    await waitFor(() => existsSync(ready), Boolean, 'the stubborn shell to ignore SIGTERM', 10_000);
    await waitFor(() => findMarkedProcesses(MARKER, 'stubborn'), (pids) => pids.length >= 1, 'the stubborn shell', 10_000);
    const report = await stopMarkedProcesses(MARKER, 'stubborn', 'exact', 300);
    expect(report.killed).toContain(child.pid);
    expect(report.survivors).toEqual([]);
    expect(await findMarkedProcesses(MARKER, 'stubborn')).toEqual([]);
  });

  test('a frozen process (an agent whose worker died) is woken to act on its SIGTERM, not left for SIGKILL', async () => {
    const log = path.join(dir, 'frozen-signals.log');
    const ready = path.join(dir, 'frozen-ready');
    const child = shell(`trap 'echo TERM >> "${log}"; exit 143' TERM; touch "${ready}"; while :; do sleep 1; done`, 'frozen');
    await waitFor(() => existsSync(ready), Boolean, 'the shell to set its trap', 10_000);
    process.kill(child.pid as number, 'SIGSTOP');
    const report = await stopMarkedProcesses(MARKER, 'frozen', 'exact', 5_000);
    expect(report.killed).toEqual([]);
    expect(await readFile(log, 'utf8')).toBe('TERM\n');
  });

  test('with nothing to stop, nothing is signalled', async () => {
    const report = await stopMarkedProcesses(MARKER, 'nobody-has-this', 'exact', 60_000);
    expect(report).toEqual({ stopped: [], killed: [], survivors: [] });
  });

  test('stopMarkedProcesses stops a process and its descendants, even one in a session of its own', async () => {
    const lock = path.join(dir, 'tree.lock');
    shell(`setsid bash -c 'trap "rm -f \\"${lock}\\"" EXIT; touch "${lock}"; sleep 300' & sleep 300`, 'tree');
    await waitFor(() => existsSync(lock), Boolean, 'the grandchild to take its lock', 10_000);
    const marked = await findMarkedProcesses(MARKER, 'tree');
    expect(marked.length).toBeGreaterThanOrEqual(3);
    const report = await stopMarkedProcesses(MARKER, 'tree', 'exact', 10_000);
    expect(existsSync(lock)).toBe(false);
    // Leaves first: a parent whose children have gone may end on its own before it is signalled; none needs SIGKILL.
    expect(report.stopped.length).toBeGreaterThanOrEqual(2);
    expect(report.killed).toEqual([]);
    expect(marked.filter((pid) => !isGone(pid))).toEqual([]);
  });

  test("a dead worker's watchdog sends SIGTERM first, leaves first, so a tool out of the agent's reach still releases its lock", async () => {
    const lock = path.join(dir, 'watchdog.lock');
    // The tool's shell records a SIGTERM of its own; stopped leaves first (its sleep), it ends without one.
    const signals = path.join(dir, 'watchdog-signals.log');
    const tool = `trap "echo TERM >> ${signals}" TERM; trap "rm -f ${lock}" EXIT; touch "${lock}"; sleep 300`;
    const { worker, value } = await standInWorker(
      `require('node:child_process').spawn('bash', ['-c', ${JSON.stringify(tool)}], { detached: true, stdio: 'ignore', env }).unref();`,
      lock,
    );
    expect(await findMarkedProcesses(WORKER_MARKER, value)).not.toEqual([]);

    worker.kill('SIGKILL');
    await waitFor(() => findMarkedProcesses(WORKER_MARKER, value), (pids) => pids.length === 0, 'the watchdog to stop the tool', WATCHDOG_WAIT_MS);
    expect(existsSync(lock)).toBe(false);
    expect(existsSync(signals)).toBe(false);
  });

  test("a dead worker's agent is frozen at once, so its tool's clean-up gets the watchdog's grace, not the agent's own kill", async () => {
    // The stand-in agent, started as every agent is (spawnAgent), does what the CLI does on SIGTERM: SIGKILLs its tool's
    // process group. Its tool, in a session of its own, needs 2 s to release its lock (a wait in the shell itself,
    // on a pipe nobody writes to), ignoring SIGTERM meanwhile. Told of its worker's death by SIGTERM, the agent would
    // cut that clean-up short; frozen, it is stopped after its tool, by the watchdog.
    const log = path.join(dir, 'frozen-agent.log');
    const fifo = path.join(dir, 'frozen-agent.fifo');
    const ready = path.join(dir, 'frozen-agent-ready');
    const tool = `trap 'trap "" TERM; read -t 2 <> "${fifo}"; echo tool-released >> "${log}"' EXIT; touch "${ready}"; sleep 300`;
    const agent = `mkfifo "${fifo}"; setsid bash -c '${tool.replaceAll("'", "'\\''")}' & tool=$!; trap 'kill -KILL -- -$tool; echo agent-stopped >> "${log}"; exit 143' TERM; wait $tool`;
    const spawnAgent = path.join(PROJECT_ROOT, 'dist', 'activities', 'backends', 'claude-cli', 'spawn-agent.js');
    const { worker, value } = await standInWorker(
      `import(${JSON.stringify(spawnAgent)}).then((s) => s.spawnAgent({ binary: 'bash', args: ['-c', ${JSON.stringify(agent)}], cwd: ${JSON.stringify(dir)}, env }).catch(() => {}));`,
      ready,
    );

    worker.kill('SIGKILL');
    await waitFor(() => findMarkedProcesses(WORKER_MARKER, value), (pids) => pids.length === 0, 'the watchdog to stop agent and tool', WATCHDOG_WAIT_MS);
    expect(await readFile(log, 'utf8')).toBe('tool-released\nagent-stopped\n');
  });
});

/**
 * The stand-in worker's watchdog grace. The watchdog signals leaves only for the first half of it, then everything
 * left: with 10 s, a tool whose clean-up (a 2 s wait) a loaded machine stretched past 5 s had its frozen agent woken
 * and SIGTERMed meanwhile, which SIGKILLed it mid clean-up (CI: 'agent-stopped' alone, the test 6.8 s long). The tests
 * wait for what the processes do, never for the grace, so a long one costs nothing.
 */
const WATCHDOG_GRACE_MS = 60_000;

/**
 * How long a test waits for the watchdog: past its grace, when it SIGKILLs what is left, so that a watchdog a loaded
 * machine held up fails on what the processes did (the log), not on a wait shorter than the grace (CI of 9bc4441: three
 * processes still there after 20 s, at load 4 files + the suite's agents).
 */
const WATCHDOG_WAIT_MS = WATCHDOG_GRACE_MS + 30_000;

/**
 * A stand-in worker: a `node` that loads the watchdog (from dist/, as a worker does), runs `start` (which finds the
 * worker's marker environment in `env`), prints its marker and waits, until `ready` exists. Killed with SIGKILL, it
 * leaves only the watchdog to stop what it started.
 */
async function standInWorker(start: string, ready: string): Promise<{ worker: ChildProcess; value: string }> {
  const watchdog = path.join(PROJECT_ROOT, 'dist', 'activities', 'process', 'orphan-watchdog.js');
  const script = `
    import(${JSON.stringify(watchdog)}).then((m) => {
      const value = m.workerMarkerValue(${WATCHDOG_GRACE_MS});
      const env = { PATH: process.env.PATH, ${WORKER_MARKER}: value };
      ${start}
      process.stdout.write(value + '\\n');
      setInterval(() => {}, 1000);
    });`;
  const worker = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(worker);
  let marker = '';
  worker.stdout?.on('data', (chunk: Buffer) => (marker += chunk.toString()));
  await waitFor(() => marker.includes('\n') && existsSync(ready), Boolean, 'the stand-in worker to start its process', 20_000);
  return { worker, value: marker.trim() };
}
