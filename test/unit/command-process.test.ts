import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCommandProcess, type CommandRunOptions } from '../../src/activities/backends/command/command-process.js';
import { TranscriptWriter } from '../../src/activities/backends/claude-cli/transcript-writer.js';
import { isGone } from '../../src/activities/process/stop.js';

/* One run of a command stage's command, as a real process: its output recorded line by line, bounded, and its stop. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'command-process-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function run(script: string, extra: Partial<CommandRunOptions> = {}): Promise<{ result: Awaited<ReturnType<typeof runCommandProcess>>; lines: { stream: string; text: string }[] }> {
  const file = path.join(dir, `${Math.random().toString(36).slice(2)}.jsonl`);
  const transcript = await TranscriptWriter.open(file, ['sk-secret-value-123']);
  const result = await runCommandProcess({
    argv: ['/bin/sh', '-c', script],
    cwd: dir,
    env: { PATH: process.env.PATH ?? '' },
    transcript,
    killGraceMs: 500,
    heartbeatIntervalMs: 1_000,
    stdoutTailChars: 100,
    stderrTailChars: 100,
    signal: new AbortController().signal,
    heartbeat: () => {},
    onSpawn: async () => {},
    ...extra,
  });
  await transcript.close();
  const lines = (await readFile(file, 'utf8')).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { stream: string; text: string });
  return { result, lines };
}

describe('a command run', () => {
  test('records stdout and stderr line by line, redacted, and keeps the end of each', async () => {
    const { result, lines } = await run('echo one; echo two >&2; echo "key sk-secret-value-123"; exit 3');
    expect(result).toMatchObject({ exitCode: 3, cancelled: false, stdoutTail: 'one\nkey sk-secret-value-123\n', stderrTail: 'two\n' });
    // The two streams are read side by side: each keeps its order, not their interleaving.
    expect(lines.filter((l) => l.stream === 'stdout').map((l) => l.text)).toEqual(['one', 'key <redacted>']);
    expect(lines.filter((l) => l.stream === 'stderr').map((l) => l.text)).toEqual(['two']);
  });

  test('keeps a line of 1 MB to its first 64 K characters and says how much was cut', async () => {
    const { result, lines } = await run(`node -e "process.stdout.write('x'.repeat(1024 * 1024) + '\\\\nend\\\\n')"`);
    expect(result.exitCode).toBe(0);
    expect(lines[0]!.text).toBe(`${'x'.repeat(64 * 1024)} … [cut: ${1024 * 1024 - 64 * 1024} more characters]`);
    expect(lines[1]!.text).toBe('end');
    expect(result.stdoutTail.endsWith('characters]\nend\n')).toBe(true);
  });

  test('stops the command and what it started in the background when the attempt is cancelled', async () => {
    const controller = new AbortController();
    const pidFile = path.join(dir, 'bg.pid');
    const pending = run(`sleep 300 & echo $! > ${pidFile}; sleep 300`, { signal: controller.signal, env: { PATH: process.env.PATH ?? '', AGENT_PIPELINE_STAGE: `${dir}#cancel` } });
    let pid = 0;
    for (let i = 0; i < 100 && !pid; i++) {
      pid = Number(await readFile(pidFile, 'utf8').catch(() => '0'));
      if (!pid) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(isGone(pid)).toBe(false);
    controller.abort();
    const { result } = await pending;
    expect(result.cancelled).toBe(true);
    // Gone, or a zombie its new parent has not reaped yet.
    expect(isGone(pid)).toBe(true);
  });
});

describe("a command's transcript", () => {
  test('keeps its cap of the output and says how many lines it did not keep; the ends of the output stay whole', async () => {
    // 60 MB of stdout made a 147 MB transcript: a command printing without end filled the worker's disk.
    const { result, lines } = await run('i=0; while [ $i -lt 2000 ]; do echo "line $i of the output, padded to a hundred characters or so ......................"; i=$((i+1)); done; echo last', { transcriptCapBytes: 50_000 });
    expect(result.exitCode).toBe(0);
    const bytes = lines.reduce((sum, line) => sum + JSON.stringify({ type: 'command', ...line }).length + 1, 0);
    expect(bytes).toBeLessThan(51_000);
    expect(lines.at(-1)?.text).toMatch(/^\[agent-pipeline: \d+ more line\(s\) of output \(\d+ KiB as recorded\) not kept: the transcript keeps 49 KB of a command/);
    expect(lines.at(-2)?.text).toMatch(/^line \d+ of the output/);
    expect(result.stdoutTail.trimEnd().split('\n').at(-1)).toBe('last');
  });
});
