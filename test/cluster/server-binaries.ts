import { existsSync } from 'node:fs';
import { access, chmod, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { execa } from 'execa';
import { findExecutable } from '../../src/activities/process/find-executable.js';
import { resolveStateDir } from '../../src/dev/temporal-cli.js';

/** The Temporal server release the cluster test runs; its go.mod needs this Go toolchain (fetched by `go` itself). */
export const TEMPORAL_SERVER_VERSION = 'v1.32.2';
export const TEMPORAL_SERVER_GO_TOOLCHAIN = 'go1.26.10';
/** The Web UI server that matches the compose file's `temporalio/ui` image. */
export const TEMPORAL_UI_SERVER_VERSION = 'v2.49.1';

/** The official server binary and its SQL schema tool, built from the server's Go module. */
export interface ServerBinaries {
  server: string;
  sqlTool: string;
}

/** Where the server binaries are cached: `<state dir>/bin`. */
export function cachedServerBinaries(env: NodeJS.ProcessEnv = process.env): ServerBinaries {
  const bin = path.join(resolveStateDir(env), 'bin');
  return { server: path.join(bin, `temporal-server-${TEMPORAL_SERVER_VERSION}`), sqlTool: path.join(bin, `temporal-sql-tool-${TEMPORAL_SERVER_VERSION}`) };
}

/** Whether the server binaries are cached, so that the cluster test needs no Go. */
export function serverBinariesCached(env: NodeJS.ProcessEnv = process.env): boolean {
  const { server, sqlTool } = cachedServerBinaries(env);
  return existsSync(server) && existsSync(sqlTool);
}

/**
 * Returns the Temporal server and `temporal-sql-tool`, cached in `<state dir>/bin` like the Temporal CLI
 * (src/dev/temporal-cli.ts). A missing binary is built with
 * `GOTOOLCHAIN=go1.26.10 go install go.temporal.io/server/cmd/server@v1.32.2 …/cmd/tools/sql@v1.32.2`, which
 * takes many minutes on a first run (the module proxy serves the toolchain and the sources).
 * @throws when Go is missing or the build fails, with the command and its output
 */
export async function provisionServerBinaries(log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<ServerBinaries> {
  const bin = path.join(resolveStateDir(env), 'bin');
  const { server, sqlTool } = cachedServerBinaries(env);
  if ((await works(server, ['--version'])) && (await works(sqlTool, ['--version']))) return { server, sqlTool };

  const packages = ['go.temporal.io/server/cmd/server', 'go.temporal.io/server/cmd/tools/sql'].map((p) => `${p}@${TEMPORAL_SERVER_VERSION}`);
  const built = await goInstall(packages, bin, log, env);
  await rename(path.join(built, 'server'), server);
  await rename(path.join(built, 'sql'), sqlTool);
  await rm(built, { recursive: true, force: true });
  return { server, sqlTool };
}

/**
 * Returns the Temporal Web UI server built from `github.com/temporalio/ui-server/v2`, or the reason it cannot be
 * built here (the exact `go install` error). The Web UI is optional for the cluster test.
 */
export async function provisionUiServer(log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<{ binary?: string; error?: string }> {
  const bin = path.join(resolveStateDir(env), 'bin');
  const binary = path.join(bin, `temporal-ui-server-${TEMPORAL_UI_SERVER_VERSION}`);
  if (await works(binary, ['--version'])) return { binary };
  try {
    const built = await goInstall([`github.com/temporalio/ui-server/v2/cmd/server@${TEMPORAL_UI_SERVER_VERSION}`], bin, log, env);
    await rename(path.join(built, 'server'), binary);
    await rm(built, { recursive: true, force: true });
    return { binary };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

async function goInstall(packages: string[], bin: string, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<string> {
  const go = await findExecutable('go', { PATH: `${env.PATH ?? ''}:/usr/local/go/bin` });
  const command = `GOTOOLCHAIN=${TEMPORAL_SERVER_GO_TOOLCHAIN} go install ${packages.join(' ')}`;
  if (!go) throw new Error(`${command}: \`go\` is not on PATH (nor in /usr/local/go/bin); install Go >= 1.21, which fetches the ${TEMPORAL_SERVER_GO_TOOLCHAIN} toolchain itself`);
  await mkdir(bin, { recursive: true });
  const target = await mkdtemp(path.join(bin, '.build-'));
  log(`building: ${command} (first run only; many minutes on a small machine)`);
  const started = Date.now();
  // nice: the build must not starve whatever else runs on the machine.
  const result = await execa('nice', ['-n', '10', go, 'install', ...packages], {
    env: { ...env, GOBIN: target, GOTOOLCHAIN: TEMPORAL_SERVER_GO_TOOLCHAIN },
    reject: false,
    all: true,
    timeout: 60 * 60_000,
  });
  if (result.exitCode !== 0) {
    await rm(target, { recursive: true, force: true });
    throw new Error(`${command} failed (exit ${result.exitCode ?? result.signal}):\n${String(result.all).split('\n').slice(-30).join('\n')}`);
  }
  log(`built in ${Math.round((Date.now() - started) / 1000)}s`);
  for (const name of packages.map((p) => path.basename(p.split('@')[0]))) await chmod(path.join(target, name), 0o755);
  return target;
}

async function works(file: string, args: string[]): Promise<boolean> {
  try {
    await access(file);
  } catch {
    return false;
  }
  const result = await execa(file, args, { reject: false, timeout: 30_000 });
  return result.exitCode === 0;
}
