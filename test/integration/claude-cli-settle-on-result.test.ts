import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { createCliWorld, REPORT, type Attempt, type CliWorld } from './claude-cli-world.js';

/*
 * A `bare` stage with stages to follow completes on the agent's successful result, while the CLI still writes its
 * session bookkeeping and exits; the next agent of the run on the worker starts only once it is gone. The wrapper
 * around the real `claude` stretches that shutdown to 1.5 s and records when each agent started and exited.
 */

const REAL_CLAUDE = fileURLToPath(new URL('../../node_modules/.bin/claude', import.meta.url));
const SLOW_EXIT_S = 1.5;

let world: CliWorld;
let marks: string;

beforeAll(async () => {
  world = await createCliWorld({ rules: [{ match: 'Task: settle', turns: [{ text: `Done.\n${REPORT}` }], repeatLastTurn: true }] });
  marks = path.join(world.root, 'marks');
  await mkdir(marks, { recursive: true });
});
afterAll(async () => {
  await world?.close();
});

/** A CLAUDE_BIN that runs the real CLI, then takes {@link SLOW_EXIT_S} more to exit, with `exitCode` (default: the CLI's). */
async function slowExitClaude(name: string, exitCode?: number): Promise<string> {
  const file = path.join(world.root, `${name}.sh`);
  await writeFile(
    file,
    [
      '#!/bin/bash',
      `printf '%s' "$EPOCHREALTIME" > '${marks}/${name}-started-'$$`,
      `'${REAL_CLAUDE}' "$@"`,
      'rc=$?',
      `sleep ${SLOW_EXIT_S}`,
      `printf '%s' "$EPOCHREALTIME" > '${marks}/${name}-exited-'$$`,
      `exit ${exitCode ?? '$rc'}`,
      '',
    ].join('\n'),
  );
  await chmod(file, 0o755);
  return file;
}

/** When the wrappers named `name` started or exited, in seconds since the epoch. */
async function times(name: string, what: 'started' | 'exited'): Promise<number[]> {
  const files = (await readdir(marks)).filter((f) => f.startsWith(`${name}-${what}-`));
  return Promise.all(files.map(async (f) => Number(await readFile(path.join(marks, f), 'utf8'))));
}

async function settle(name: string, runId: string, stage: { id: string; bare: boolean; permissionMode?: 'auto' }, stagesFollow: boolean, exitCode?: number): Promise<Attempt> {
  return world.start({ task: 'Task: settle', runId, stage, request: { stagesFollow }, env: { CLAUDE_BIN: await slowExitClaude(name, exitCode) } });
}

describe('a bare stage with stages to follow', () => {
  test('completes on the result while its agent still exits; the next agent of the run starts once it is gone', async () => {
    const first = await settle('first', 'run-follow', { id: 'plan', bare: true }, true);
    const outcome = await first.outcome;
    expect(outcome.text).toContain(REPORT);
    // Settled on the result: the agent is still in its 1.5 s shutdown, and still holds the stage's lock.
    expect(await times('first', 'exited')).toEqual([]);
    expect(existsSync(path.join(first.stageDir, 'agent.lock'))).toBe(true);

    const next = await settle('next', 'run-follow', { id: 'build', bare: true }, false);
    expect((await next.outcome).text).toContain(REPORT);
    const [firstExited] = await times('first', 'exited');
    const [nextStarted] = await times('next', 'started');
    expect(firstExited).toBeGreaterThan(0);
    expect(nextStarted).toBeGreaterThanOrEqual(firstExited);
    // Without stages to follow the attempt waited for its own agent's exit.
    expect(await times('next', 'exited')).toHaveLength(1);
    // Once gone, the first attempt finished in the background: its lock released, its transcript closed.
    await world.exitingAgents.exited(next.request.workspace.claudeConfigDir);
    expect(existsSync(path.join(first.stageDir, 'agent.lock'))).toBe(false);
    expect(await readFile(first.request.transcriptPath, 'utf8')).toContain('"type":"result"');
  });

  test('waits for the exit without bare, and under auto mode, whose exit code can still fail a successful result', async () => {
    for (const [name, stage] of [
      ['hooks', { id: 'work', bare: false }],
      ['auto', { id: 'work', bare: true, permissionMode: 'auto' as const }],
    ] as const) {
      const attempt = await settle(name, `run-${name}`, stage, true);
      // Auto mode may end either way against the scripted server; either way, only after the agent exited.
      await attempt.outcome.catch(() => undefined);
      expect(await times(name, 'exited'), name).toHaveLength(1);
    }
  });

  test('keeps the completed result when the agent then exits with code 1, and warns', async () => {
    const warnings = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      const attempt = await settle('fails-late', 'run-late', { id: 'plan', bare: true }, true, 1);
      expect((await attempt.outcome).text).toContain(REPORT);
      expect(await times('fails-late', 'exited')).toEqual([]);
      await world.exitingAgents.exited(attempt.request.workspace.claudeConfigDir);
      expect(await times('fails-late', 'exited')).toHaveLength(1);
      expect(warnings.mock.calls.map(([text]) => String(text)).join('')).toMatch(/the agent of stage plan exited with code 1 after its successful result/);
      expect(existsSync(path.join(attempt.stageDir, 'agent.lock'))).toBe(false);
    } finally {
      warnings.mockRestore();
    }
  });
});
