import { InvalidArgumentError } from 'commander';
import { findToolNameProblem } from '../pipeline/tool-names.js';
import { toMilliseconds } from '../pipeline/duration.js';
import { OVERLAP_POLICIES, type OverlapFlag } from '../library/schedule-overlap.js';
import type { InputValue } from '../library/input-files.js';
import { InvalidRequestError } from '../errors.js';
import { findNewRunIdProblem } from '../pipeline/run-id.js';
import { UsageError } from './errors.js';

/** Collects a repeatable flag's values. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Like {@link collect}, for tool names (`--allow Read`): one starting with `-` would reach `claude` as a flag. */
export function collectToolName(value: string, previous: string[] = []): string[] {
  const problem = findToolNameProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return [...previous, value];
}

/**
 * Checks the `--id` of a new run or schedule before anything connects, so a bad id exits 2 whether or not Temporal is
 * up. @throws InvalidRequestError INPUT_INVALID naming the flag, the value and the fix
 */
export function checkNewIdFlag(id: string | undefined, kind: 'run' | 'schedule' = 'run'): void {
  const problem = id === undefined ? undefined : findNewRunIdProblem(id, kind);
  if (problem) throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] --id ${JSON.stringify(id)}: ${problem}`);
}

/** Parses a duration flag (`90s`, `30m`, `2h`, `1d`) to milliseconds, above zero. */
export function parseDurationMs(value: string): number {
  const ms = parseAgeMs(value);
  if (ms <= 0) throw new InvalidArgumentError(`expected a duration above zero, got "${value}"`);
  return ms;
}

/** Parses an age flag (`0s`, `12h`, `7d`) to milliseconds: a duration, zero included (`prune --older-than 0s`). */
export function parseAgeMs(value: string): number {
  try {
    return toMilliseconds(value.trim());
  } catch {
    throw new InvalidArgumentError(`expected a duration such as 30s, 15m, 2h or 1d, got "${value}"`);
  }
}

/** Parses a positive number flag (a budget in dollars). */
export function parsePositiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`expected a number above zero, got "${value}"`);
  return n;
}

/** Parses a positive whole number flag (rounds, attempts, counts). */
export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a whole number of 1 or more, got "${value}"`);
  return n;
}

/** Parses `--port`: the Web UI of the dev server takes port + 1000, so the port must leave room for it. */
export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 64_535) {
    throw new InvalidArgumentError(`expected a port number from 1 to 64535 (the Web UI uses port + 1000), got "${value}"`);
  }
  return port;
}

/** Parses `--overlap`: what a schedule does when a run is due while the last still runs. */
export function parseOverlap(value: string): OverlapFlag {
  if (!Object.hasOwn(OVERLAP_POLICIES, value)) throw new InvalidArgumentError(`expected one of ${Object.keys(OVERLAP_POLICIES).join(', ')}, got "${value}"`);
  return value as OverlapFlag;
}

/**
 * Parses `--input key=value` flags. `key=@path` reads the value from a file and `key=@-` from standard input (see
 * {@link readInputFlags}); `key=@@text` is the literal value `@text`.
 */
export function parseInputFlags(flags: readonly string[]): Record<string, InputValue> {
  const inputs: Record<string, InputValue> = {};
  for (const flag of flags) {
    const eq = flag.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input ${flag}: expected key=value, for example --input feature="dark mode" (or key=@file to read it from a file)`);
    const key = flag.slice(0, eq);
    const value = flag.slice(eq + 1);
    if (value.startsWith('@@')) inputs[key] = value.slice(1);
    else if (value.startsWith('@')) {
      if (value.length === 1) throw new UsageError(`--input ${flag}: expected a file after @ (key=@notes.md, or key=@- for standard input); write key=@@ for a literal "@"`);
      inputs[key] = { file: value.slice(1) };
    } else inputs[key] = value;
  }
  return inputs;
}

/**
 * Parses `--input` flags and reads the values given as `@file` or `@-`. Errors name the flag and the file.
 * @throws InvalidRequestError (`FILE_NOT_FOUND`, `FILE_UNREADABLE`, `INPUT_TOO_LARGE`, `INPUT_INVALID`): exit code 2
 */
export async function readInputFlags(flags: readonly string[], stdin: NodeJS.ReadableStream = process.stdin): Promise<Record<string, string>> {
  // Loaded here: it measures values as Temporal payloads, with the SDK's converter (the flags' parsers load none).
  const { readInputValues } = await import('../library/input-files.js');
  return readInputValues(parseInputFlags(flags), { describe: (name, file) => `--input ${name}=@${file}`, stdin });
}
