import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';
import type { BenchEnvironment } from './results.js';
import { CLAUDE_BINARY, PROJECT_ROOT } from './stack.js';

async function firstLine(command: string, args: string[]): Promise<string> {
  const result = await execa(command, args, { reject: false, cwd: PROJECT_ROOT, timeout: 10_000 });
  return result.failed ? 'unknown' : result.stdout.split('\n')[0].trim();
}

/** The machine and versions, read once at the start of a run; `loadAverage.end` is filled in at the end. */
export async function describeEnvironment(): Promise<BenchEnvironment> {
  const env = { ...process.env, AGENT_PIPELINE_HOME: process.env.AGENT_PIPELINE_HOME ?? path.join(PROJECT_ROOT, '.agent-pipeline') };
  const temporal = await findTemporalCli({ env, provision: false }).catch(() => undefined);
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
  };
}
