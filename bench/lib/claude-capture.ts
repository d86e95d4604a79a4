import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { elapsedMs } from './stats.js';

/*
 * A `CLAUDE_BIN` wrapper that records each call the worker makes (arguments, environment, working
 * directory, stdin) and times the real binary, plus the replay of those calls as a plain shell loop:
 * the baseline of the overhead benchmark runs exactly what the pipeline ran, flags and prompts included.
 */

/** One recorded `claude` call. */
export interface CapturedCall {
  args: string[];
  /** `NAME=value` entries, as the worker passed them. */
  env: string[];
  cwd: string;
  stdinFile: string;
  /** Wrapper start, real binary start, real binary exit, from bash's $EPOCHREALTIME. @unit milliseconds since the epoch */
  wrapperStartedAt: number;
  agentStartedAt: number;
  agentExitedAt: number;
}

/**
 * Writes the wrapper into `dir` and returns its path. It uses bash builtins only, so the time it adds
 * before `wrapperStartedAt` is bash's own start (about a millisecond or two).
 */
export async function writeClaudeWrapper(dir: string, realClaude: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const wrapper = path.join(dir, 'claude-wrapper.sh');
  const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  await writeFile(
    wrapper,
    [
      '#!/bin/bash',
      '# Benchmark wrapper: records this call, then runs the real claude and times it.',
      't0=$EPOCHREALTIME',
      `out=${quote(dir)}/call-$$`,
      `printf '%s\\0' "$@" > "$out.args"`,
      `while IFS= read -r -d '' entry; do printf '%s\\0' "$entry"; done < /proc/$$/environ > "$out.env"`,
      `printf '%s' "$PWD" > "$out.cwd"`,
      `IFS= read -r -d '' input; printf '%s' "$input" > "$out.stdin"`,
      't1=$EPOCHREALTIME',
      `${quote(realClaude)} "$@" < "$out.stdin"`,
      'rc=$?',
      `printf '%s %s %s\\n' "$t0" "$t1" "$EPOCHREALTIME" > "$out.times"`,
      'exit $rc',
      '',
    ].join('\n'),
  );
  await chmod(wrapper, 0o755);
  return wrapper;
}

/** The calls recorded in `dir` that have finished, oldest first. */
export async function readCapturedCalls(dir: string): Promise<CapturedCall[]> {
  const calls: CapturedCall[] = [];
  for (const name of await readdir(dir)) {
    if (!name.endsWith('.times')) continue;
    const base = path.join(dir, name.slice(0, -'.times'.length));
    const split = async (suffix: string): Promise<string[]> => (await readFile(`${base}.${suffix}`, 'utf8')).split('\0').filter((s, i, all) => s !== '' || i < all.length - 1);
    const [t0, t1, t2] = (await readFile(`${base}.times`, 'utf8')).trim().split(' ').map((s) => Number(s) * 1000);
    calls.push({
      args: await split('args'),
      env: await split('env'),
      cwd: await readFile(`${base}.cwd`, 'utf8'),
      stdinFile: `${base}.stdin`,
      wrapperStartedAt: t0,
      agentStartedAt: t1,
      agentExitedAt: t2,
    });
  }
  return calls.sort((a, b) => a.wrapperStartedAt - b.wrapperStartedAt);
}

const LOOP_SCRIPT = [
  '#!/bin/bash',
  '# The baseline: the same claude calls the pipeline made, one after another, as a plain shell loop.',
  'set -e',
  'claude="$1"; root="$2"; cd "$root/work"',
  'for call in "$root"/calls/*/; do',
  `  mapfile -d '' -t args < "$call/args"`,
  `  mapfile -d '' -t envs < "$call/env"`,
  '  env -i "${envs[@]}" "$claude" "${args[@]}" < "$call/stdin" > "$call/stdout"',
  'done',
  '',
].join('\n');

/**
 * Replays `calls` in a fresh folder: a new working directory, a new CLAUDE_CONFIG_DIR and new session ids
 * (the CLI refuses a session id that exists), everything else byte for byte. Returns the loop's wall time.
 * @throws Error when a call fails, with the loop's stderr
 */
export async function replayCalls(
  calls: readonly CapturedCall[],
  folder: string,
  realClaude: string,
  /** The arguments to run instead of the recorded ones (the hand-written baseline). */
  argsFor?: (call: CapturedCall) => string[],
): Promise<number> {
  const workDir = path.join(folder, 'work');
  const configDir = path.join(folder, 'claude-config');
  await mkdir(workDir, { recursive: true });
  await mkdir(configDir, { recursive: true });
  for (const [index, call] of calls.entries()) {
    const callDir = path.join(folder, 'calls', String(index).padStart(3, '0'));
    await mkdir(callDir, { recursive: true });
    const args = argsFor?.(call) ?? call.args.map((arg, i) => (call.args[i - 1] === '--session-id' ? randomUUID() : arg));
    const env = call.env.map((entry) => (entry.startsWith('CLAUDE_CONFIG_DIR=') ? `CLAUDE_CONFIG_DIR=${configDir}` : entry));
    await writeFile(path.join(callDir, 'args'), args.map((a) => `${a}\0`).join(''));
    await writeFile(path.join(callDir, 'env'), env.map((e) => `${e}\0`).join(''));
    await writeFile(path.join(callDir, 'stdin'), await readFile(call.stdinFile));
  }
  const script = path.join(folder, 'loop.sh');
  await writeFile(script, LOOP_SCRIPT, { mode: 0o755 });
  const startNs = process.hrtime.bigint();
  const result = await execa(script, [realClaude, folder], { reject: false, stdin: 'ignore' });
  const wallMs = elapsedMs(startNs);
  if (result.failed) throw new Error(`the baseline loop failed (${result.shortMessage}): ${result.stderr.slice(-1_000)}`);
  return wallMs;
}
