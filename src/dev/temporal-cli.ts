import { chmod, mkdir, mkdtemp, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { findExecutable, isExecutableFile } from '../activities/process/find-executable.js';

/**
 * The Temporal CLI tag built from source when no binary is found. Later tags carry a `replace`
 * directive in go.mod, which `go install pkg@version` rejects (temporalio/cli#213).
 */
export const TEMPORAL_CLI_GO_VERSION = 'v1.5.1';
const TEMPORAL_CLI_GO_PACKAGE = 'github.com/temporalio/cli/cmd/temporal';
// What the release builds inject with ldflags; a plain `go install` would report 0.0.0-DEV.
const TEMPORAL_CLI_GO_LDFLAGS = `-ldflags=-s -w -X github.com/temporalio/cli/temporalcli.Version=${TEMPORAL_CLI_GO_VERSION.slice(1)}`;

/** The official release archive; `platform` and `arch` query parameters are appended. */
export const TEMPORAL_CLI_DOWNLOAD_URL = 'https://temporal.download/cli/archive/latest';

const INSTALL_HINT =
  'Install the Temporal CLI (https://docs.temporal.io/cli) and put `temporal` on PATH or set TEMPORAL_CLI=/path/to/temporal; ' +
  `or install Go >= 1.25 so it can be built from ${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_GO_VERSION}.`;

/** Options for {@link findTemporalCli}. */
export interface FindTemporalCliOptions {
  /** Where `TEMPORAL_CLI`, `PATH` and `AGENT_PIPELINE_HOME` are read from; also the environment `go` runs with. @default process.env */
  env?: NodeJS.ProcessEnv;
  /** Receives human-readable progress lines while the CLI is built or downloaded. @default writes each line to stderr */
  log?: (line: string) => void;
  /** Build or download the CLI into the cache when none is found. When `false`, a missing CLI throws at once. @default true */
  provision?: boolean;
  /** Release archive to download when Go is unavailable or its build fails; `null` skips the download. @default {@link TEMPORAL_CLI_DOWNLOAD_URL} for this platform */
  downloadUrl?: string | null;
  /** Longest a `go install` (or waiting for another process's) may take. @unit milliseconds @default 1_800_000 */
  buildTimeoutMs?: number;
  /** Longest the archive download may take. @unit milliseconds @default 600_000 */
  downloadTimeoutMs?: number;
}

/** Thrown when no working Temporal CLI can be found or provisioned; the message lists every place tried and how to fix it. */
export class TemporalCliNotFoundError extends Error {
  readonly code = 'TEMPORAL_CLI_NOT_FOUND';
  constructor(readonly tried: readonly string[]) {
    super(`[TEMPORAL_CLI_NOT_FOUND] No working Temporal CLI found. Tried:\n${tried.map((t) => `  - ${t}`).join('\n')}\n${INSTALL_HINT}`);
    this.name = 'TemporalCliNotFoundError';
  }
}

const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The folder for the dev server's state (its databases and log): `AGENT_PIPELINE_HOME` when set, otherwise
 * `.agent-pipeline/` in the current folder (the user's project, beside the default workspaces root) — never inside
 * the installed package, which `npm ci` wipes.
 */
export function resolveStateDir(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  return env.AGENT_PIPELINE_HOME ? path.resolve(env.AGENT_PIPELINE_HOME) : path.join(cwd, '.agent-pipeline');
}

/**
 * The folder a provisioned Temporal CLI is cached in: `<AGENT_PIPELINE_HOME>/bin` when set; in a clone of this
 * repository its `.agent-pipeline/bin`; in an installed package the user's cache,
 * `$XDG_CACHE_HOME/agent-pipeline/bin` (default `~/.cache/agent-pipeline/bin`), shared by every project.
 */
export function resolveCliCacheDir(env: NodeJS.ProcessEnv = process.env, packageRoot = PACKAGE_ROOT): string {
  if (env.AGENT_PIPELINE_HOME) return path.join(path.resolve(env.AGENT_PIPELINE_HOME), 'bin');
  if (!packageRoot.split(path.sep).includes('node_modules')) return path.join(packageRoot, '.agent-pipeline', 'bin');
  const cacheHome = env.XDG_CACHE_HOME ? path.resolve(env.XDG_CACHE_HOME) : path.join(env.HOME ?? homedir(), '.cache');
  return path.join(cacheHome, 'agent-pipeline', 'bin');
}

/**
 * Returns the absolute path of a working `temporal` binary, looking in order at `TEMPORAL_CLI`, `PATH`
 * and the cache ({@link resolveCliCacheDir}). When none is found, builds it with `go install` (or, without Go,
 * downloads the release archive) into the cache; concurrent callers wait on a lock file and reuse that build.
 * Every candidate must answer `temporal --version`.
 * @throws {TemporalCliNotFoundError} when nothing works; also when `TEMPORAL_CLI` is set but does not run.
 */
export async function findTemporalCli(options: FindTemporalCliOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const tried: string[] = [];

  if (env.TEMPORAL_CLI) {
    // An explicit setting that does not work is an error, not something to silently route around.
    const problem = await checkTemporalCli(env.TEMPORAL_CLI);
    if (problem) throw new TemporalCliNotFoundError([`TEMPORAL_CLI=${env.TEMPORAL_CLI}: ${problem}; fix the path or unset it`]);
    return path.resolve(env.TEMPORAL_CLI);
  }
  tried.push('TEMPORAL_CLI: not set');

  const onPath = await findExecutable('temporal', { PATH: env.PATH });
  if (onPath) {
    const problem = await checkTemporalCli(onPath);
    if (!problem) return onPath;
    tried.push(`PATH: ${onPath} ${problem}`);
  } else {
    tried.push(`PATH: no executable \`temporal\` in ${env.PATH ?? '(PATH unset)'}`);
  }

  const cached = path.join(resolveCliCacheDir(env), 'temporal');
  const cachedProblem = await checkTemporalCli(cached);
  if (!cachedProblem) return cached;
  tried.push(`cache: ${cached} ${cachedProblem}`);

  if (options.provision === false) throw new TemporalCliNotFoundError(tried);
  return provisionTemporalCli(cached, env, options, tried);
}

async function provisionTemporalCli(cached: string, env: NodeJS.ProcessEnv, options: FindTemporalCliOptions, tried: string[]): Promise<string> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const buildTimeoutMs = options.buildTimeoutMs ?? 1_800_000;
  await mkdir(path.dirname(cached), { recursive: true });
  const release = await acquireLock(`${cached}.lock`, buildTimeoutMs, log);
  try {
    // Another process may have provisioned it while we waited for the lock.
    if (!(await checkTemporalCli(cached))) return cached;

    const go = await findExecutable('go', { PATH: env.PATH });
    const goCommand = `go install ${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_GO_VERSION}`;
    if (go) {
      try {
        await installInto(cached, (dir) => buildWithGo(go, dir, env, buildTimeoutMs, log));
        return cached;
      } catch (error) {
        tried.push(`${goCommand}: ${errorText(error)}`);
      }
    } else {
      tried.push(`${goCommand}: \`go\` not found on PATH`);
    }

    const url = options.downloadUrl === undefined ? defaultDownloadUrl() : options.downloadUrl;
    if (url === null) {
      tried.push('download: disabled');
    } else {
      try {
        await installInto(cached, (dir) => download(url, dir, options.downloadTimeoutMs ?? 600_000, log));
        return cached;
      } catch (error) {
        tried.push(`download ${url}: ${errorText(error)}`);
      }
    }
    throw new TemporalCliNotFoundError(tried);
  } finally {
    await release();
  }
}

/** Produces a binary in a private temp folder next to the cache, checks it, then renames it into place, so readers never see a partial file. */
async function installInto(target: string, produce: (dir: string) => Promise<string>): Promise<void> {
  const dir = await mkdtemp(path.join(path.dirname(target), '.tmp-'));
  try {
    const produced = await produce(dir);
    await chmod(produced, 0o755);
    const problem = await checkTemporalCli(produced);
    if (problem) throw new Error(`the new binary ${problem}`);
    await rename(produced, target);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function buildWithGo(go: string, dir: string, env: NodeJS.ProcessEnv, timeoutMs: number, log: (line: string) => void): Promise<string> {
  log(`Building the Temporal CLI from its Go module (first run only, takes a few minutes)...`);
  log(`  ${go} install ${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_GO_VERSION} (GOBIN=${dir})`);
  const startedAt = Date.now();
  // Compiling prints nothing for minutes; say that we are alive so CI logs do not look hung.
  const ticker = setInterval(() => log(`  still building the Temporal CLI (${Math.round((Date.now() - startedAt) / 1000)}s)...`), 30_000);
  const tail: string[] = [];
  try {
    // `pkg@version` mode ignores any go.mod around; running in the temp folder keeps a go.work out of it too.
    const build = execa(go, ['install', TEMPORAL_CLI_GO_LDFLAGS, `${TEMPORAL_CLI_GO_PACKAGE}@${TEMPORAL_CLI_GO_VERSION}`], {
      cwd: dir,
      env: { ...env, GOBIN: dir },
      extendEnv: false,
      stdin: 'ignore',
      timeout: timeoutMs,
      reject: false,
    });
    for await (const line of build.iterable({ from: 'stderr' })) {
      log(`  ${line}`);
      tail.push(line);
      if (tail.length > 10) tail.shift();
    }
    const result = await build;
    if (result.failed) throw new Error(`${result.shortMessage}${tail.length ? `\n${tail.join('\n')}` : ''}`);
  } finally {
    clearInterval(ticker);
  }
  log(`  built the Temporal CLI in ${Math.round((Date.now() - startedAt) / 1000)}s`);
  return path.join(dir, 'temporal');
}

async function download(url: string, dir: string, timeoutMs: number, log: (line: string) => void): Promise<string> {
  log(`Downloading the Temporal CLI from ${url} (first run only)...`);
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
  const archive = path.join(dir, 'temporal.tar.gz');
  await writeFile(archive, Buffer.from(await response.arrayBuffer()));
  await execa('tar', ['-xzf', archive, '-C', dir], { stdin: 'ignore' });
  return path.join(dir, 'temporal');
}

function defaultDownloadUrl(): string | null {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch];
  if ((process.platform !== 'linux' && process.platform !== 'darwin') || !arch) return null;
  return `${TEMPORAL_CLI_DOWNLOAD_URL}?platform=${process.platform}&arch=${arch}`;
}

/** Returns why `file` is not a working Temporal CLI, or `undefined` when `file --version` says it is one. */
async function checkTemporalCli(file: string): Promise<string | undefined> {
  if (!(await isExecutableFile(file))) return 'does not exist or is not an executable file';
  const result = await execa(file, ['--version'], { stdin: 'ignore', timeout: 30_000, reject: false });
  if (result.failed) return `failed to run \`--version\`: ${result.shortMessage}`;
  if (!/^temporal version /m.test(result.stdout)) return `answered \`--version\` with ${JSON.stringify(result.stdout.slice(0, 80))}, not "temporal version ..."`;
  return undefined;
}

/** Takes an exclusive lock file holding our pid; waits while a live process holds it and clears one left by a dead process. */
async function acquireLock(lockFile: string, timeoutMs: number, log: (line: string) => void): Promise<() => Promise<void>> {
  const deadline = Date.now() + timeoutMs;
  let announced = false;
  for (;;) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(JSON.stringify({ pid: process.pid, host: hostname() }));
      await handle.close();
      return () => rm(lockFile, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (await isStaleLock(lockFile)) {
      await rm(lockFile, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`[TEMPORAL_CLI_LOCKED] Waited ${Math.round(timeoutMs / 1000)}s for ${lockFile}, held by another process provisioning the Temporal CLI. If no such process is running, delete that file.`);
    }
    if (!announced) log(`Waiting for another process to finish provisioning the Temporal CLI (lock ${lockFile})...`);
    announced = true;
    await sleep(500);
  }
}

async function isStaleLock(lockFile: string): Promise<boolean> {
  try {
    const owner = JSON.parse(await readFile(lockFile, 'utf8')) as { pid?: unknown; host?: unknown };
    if (owner.host !== hostname() || typeof owner.pid !== 'number') return false;
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH') return true;
    if (code === 'ENOENT' || code === 'EPERM') return false;
    // Unparsable: either just created and not yet written, or left half-written by a crash long ago.
    const info = await stat(lockFile).catch(() => undefined);
    return info !== undefined && Date.now() - info.mtimeMs > 60_000;
  }
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
