import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { findExecutable, isExecutableFile } from '../activities/process/find-executable.js';

/*
 * versitygw (Apache-2.0), the S3-compatible server the tests run the `s3://` store against: a real S3 service on a
 * local folder, built once from its Go module (about 3 CPU-minutes) into the user's cache, which every clone and
 * worktree shares. `.ci/run` provisions it before the tests (dist/dev/provision-versitygw.js); a machine without Go
 * has none, and the tests that need it skip with one line.
 */

export const VERSITYGW_GO_PACKAGE = 'github.com/versity/versitygw/cmd/versitygw';
export const VERSITYGW_VERSION = 'v1.8.0';

/** `$XDG_CACHE_HOME/agent-pipeline/versitygw-<version>/versitygw` (default `~/.cache/...`). */
export function versitygwPath(env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env.XDG_CACHE_HOME ? path.resolve(env.XDG_CACHE_HOME) : path.join(env.HOME ?? homedir(), '.cache');
  return path.join(cacheHome, 'agent-pipeline', `versitygw-${VERSITYGW_VERSION}`, 'versitygw');
}

/** Go on PATH or where its official installs live. */
async function findGo(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  return (await findExecutable('go', { PATH: env.PATH })) ?? ((await isExecutableFile('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
}

/**
 * The cached versitygw, built with `go install` when missing and `build` is set.
 * @returns its path, or undefined with the reason when there is none and it cannot be built
 */
export async function findVersitygw(options: { env?: NodeJS.ProcessEnv; build?: boolean; log?: (line: string) => void } = {}): Promise<{ path?: string; problem?: string }> {
  const env = options.env ?? process.env;
  const target = versitygwPath(env);
  if (await isExecutableFile(target)) return { path: target };
  if (!options.build) return { problem: `${target} is missing (\`node dist/dev/provision-versitygw.js\` builds it)` };
  const go = await findGo(env);
  if (!go) return { problem: `${target} is missing and \`go\` is not installed to build it` };
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  await mkdir(path.dirname(target), { recursive: true });
  const dir = await mkdtemp(`${target}.build-`);
  try {
    log(`building versitygw ${VERSITYGW_VERSION} with ${go} install (first run only, a few minutes)...`);
    // `pkg@version` mode ignores any go.mod around; the temp folder keeps a go.work out of it too.
    const result = await execa(go, ['install', `${VERSITYGW_GO_PACKAGE}@${VERSITYGW_VERSION}`], {
      cwd: dir,
      env: { ...env, GOBIN: dir, GOTOOLCHAIN: env.GOTOOLCHAIN ?? 'local' },
      extendEnv: false,
      stdin: 'ignore',
      timeout: 1_800_000,
      reject: false,
    });
    if (result.failed) return { problem: `go install ${VERSITYGW_GO_PACKAGE}@${VERSITYGW_VERSION} failed: ${result.shortMessage}\n${String(result.stderr).slice(-2000)}` };
    // Renamed into place whole: a concurrent caller sees no binary or a complete one.
    await rename(path.join(dir, 'versitygw'), target);
    return { path: target };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
