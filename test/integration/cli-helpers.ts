import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/** The command as a user runs it: the built entry point (`npm test` builds first). */
export const CLI = path.join(PROJECT_ROOT, 'bin', 'agent-pipeline.js');
export const CLI_FIXTURES = path.join(PROJECT_ROOT, 'test', 'fixtures', 'cli');

/** Runs `agent-pipeline ARGS` with `env` (no terminal: output is piped) and never throws on a non-zero exit. */
export async function runCli(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs = 90_000): Promise<CliResult> {
  const result = await execa('node', [CLI, ...args], { env, extendEnv: false, reject: false, timeout: timeoutMs, stdin: 'ignore', all: true });
  return { exitCode: result.exitCode, stdout: String(result.stdout), stderr: String(result.stderr), all: String(result.all) };
}

const ONE_PROCESS = path.join(PROJECT_ROOT, 'test', 'helpers', 'cli-one-process.ts');

/**
 * Runs several commands, one after another, in one Node process through the CLI's entry module (see
 * test/helpers/cli-one-process.ts): for checks of many commands' help and usage errors, where a process per command
 * cost a test file ten CPU seconds. Each result is what `runCli` would have returned (`all` is stdout then stderr).
 * Keep a `runCli` call for each behaviour checked this way, so the command as a user runs it is tested too.
 */
export async function runCliCommands(commands: readonly (readonly string[])[], env: NodeJS.ProcessEnv, timeoutMs = 90_000): Promise<CliResult[]> {
  // The bundled entry, which bin/agent-pipeline.js runs for every command but those that run a worker.
  const client = path.join(PROJECT_ROOT, 'dist', 'cli-bundle', 'client.js');
  const result = await execa('node', [ONE_PROCESS, client, JSON.stringify(commands)], { env, extendEnv: false, reject: false, timeout: timeoutMs, stdin: 'ignore' });
  if (result.exitCode !== 0) throw new Error(`${ONE_PROCESS} exited ${result.exitCode}:\n${String(result.stdout)}\n${String(result.stderr)}`);
  // As execa returns a command's output: without its final newline.
  const trim = (text: string): string => text.replace(/\r?\n$/, '');
  return (JSON.parse(String(result.stdout)) as { exitCode: number; stdout: string; stderr: string }[]).map(({ exitCode, stdout, stderr }) => ({
    exitCode,
    stdout: trim(stdout),
    stderr: trim(stderr),
    all: [trim(stdout), trim(stderr)].filter(Boolean).join('\n'),
  }));
}

/**
 * Runs the commands whose index is in `ownProcess` each as a user runs it (`runCli`), and the others together in one
 * process (`runCliCommands`); resolves to their results in the order given.
 */
export async function runCliMixed(commands: readonly (readonly string[])[], ownProcess: ReadonlySet<number>, env: NodeJS.ProcessEnv): Promise<CliResult[]> {
  const together = await runCliCommands(commands.filter((_, i) => !ownProcess.has(i)), env);
  let next = 0;
  return Promise.all(commands.map(async (args, i) => (ownProcess.has(i) ? runCli(args, env) : together[next++])));
}

/** What a command printed and how it exited. */
export interface CliResult {
  exitCode: number | undefined;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved as printed. */
  all: string;
}

/** Parses a `--json` command's stdout, failing with the whole output when it is not JSON. */
export function parseJson<T = Record<string, unknown>>(result: CliResult): T {
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new Error(`expected JSON, got exit ${result.exitCode}:\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  }
}

/**
 * Calls `probe` until `accept` holds for its value, failing with the last value after `timeoutMs`. Between calls it
 * waits half a second, or as long as the call took when that was longer: a probe that starts the command line costs a
 * Node process, and on a loaded 2-core machine back-to-back ones would take a core from the run being waited for.
 */
export async function eventually<T>(probe: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = 60_000, what = 'the condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  while (Date.now() < deadline) {
    const probedAt = Date.now();
    last = await probe();
    if (accept(last)) return last;
    await sleep(Math.min(Math.max(500, Date.now() - probedAt), 3_000));
  }
  throw new Error(`${what} did not hold within ${timeoutMs} ms; last value: ${JSON.stringify(last, null, 2)?.slice(0, 3000)}`);
}

/**
 * The arguments a person gets who pastes `line`, a command the CLI printed (`agent-pipeline watch 'my run'`, with
 * text before it such as `Follow it:` or `→`), into a POSIX shell: `sh` expands what follows `agent-pipeline` in the
 * folder `cwd` and prints each word.
 */
export async function pastedArguments(line: string, cwd: string): Promise<string[]> {
  const at = line.indexOf('agent-pipeline ');
  if (at < 0) throw new Error(`no agent-pipeline command in ${JSON.stringify(line)}`);
  const { stdout } = await execa('sh', ['-c', `printf '%s\\0' ${line.slice(at + 'agent-pipeline '.length)}`], { cwd, stdin: 'ignore' });
  return String(stdout).split('\0').slice(0, -1);
}
