import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import type { BenchEnvironment } from './results.js';
import { CLAUDE_BINARY, PROJECT_ROOT, projectEnv } from './stack.js';

/**
 * Linux's CPU pressure: the share of the last 60 s in which some runnable task waited for a CPU (PSI `some avg60`),
 * in per cent; `null` where /proc/pressure is missing. Unlike the load average it also shows a busy host.
 */
export function readCpuPressure(): number | null {
  try {
    return Number(/some avg10=[\d.]+ avg60=([\d.]+)/.exec(readFileSync('/proc/pressure/cpu', 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return null;
  }
}

async function firstLine(command: string, args: string[]): Promise<string> {
  const result = await execa(command, args, { reject: false, cwd: PROJECT_ROOT, timeout: 10_000 });
  return result.failed ? 'unknown' : result.stdout.split('\n')[0].trim();
}

/** The machine and versions, read once at the start of a run; `loadAverage.end` and `cpuPressure.end` are filled in at the end. */
export async function describeEnvironment(): Promise<BenchEnvironment> {
  const temporal = await findTemporalCli({ env: projectEnv(), provision: false }).catch(() => undefined);
  const sdk = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'node_modules/@temporalio/worker/package.json'), 'utf8')) as { version: string };
  const dirty = (await firstLine('git', ['--no-optional-locks', 'status', '--porcelain', '--untracked-files=no'])) !== '';
  return {
    cores: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryMb: Math.round(os.totalmem() / 2 ** 20),
    nodeVersion: process.version,
    claudeCliVersion: (await firstLine(CLAUDE_BINARY, ['--version'])).replace(/\s*\(Claude Code\)/, ''),
    temporalCliVersion: temporal ? (await firstLine(temporal, ['--version'])).replace(/^temporal version\s*/, '') : 'not found',
    temporalSdkVersion: sdk.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    gitCommit: `${await firstLine('git', ['rev-parse', '--short', 'HEAD'])}${dirty ? ' (with uncommitted changes)' : ''}`,
    niceness: os.getPriority(),
    loadAverage: { start: Math.round(os.loadavg()[0] * 100) / 100, end: Number.NaN },
    cpuPressure: { start: readCpuPressure(), end: null },
  };
}
