import { execa } from 'execa';
import { findExecutable } from '../../process/find-executable.js';

/*
 * What a worker's host offers Claude Code's sandbox: bubblewrap and socat on Linux, and whether bubblewrap may make its
 * namespaces there. A worker asks before each attempt that needs it; the answer is cached, a negative one only briefly,
 * so that installing the packages on a running worker takes effect without a restart.
 */

/** What the sandbox needs on Linux (Debian package names, which are also the command names). */
export const SANDBOX_PACKAGES = ['bubblewrap', 'socat'] as const;
/** How to install them on Debian or Ubuntu. */
export const SANDBOX_INSTALL = 'apt-get install -y bubblewrap socat';

/** The sandbox's programs missing on this host (always none outside Linux: macOS has Seatbelt built in). */
export async function missingSandboxPackages(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<string[]> {
  if (platform !== 'linux') return [];
  const commands: Record<(typeof SANDBOX_PACKAGES)[number], string> = { bubblewrap: 'bwrap', socat: 'socat' };
  const found = await Promise.all(SANDBOX_PACKAGES.map(async (pkg) => ((await findExecutable(commands[pkg], env)) ? undefined : pkg)));
  return found.filter((pkg): pkg is (typeof SANDBOX_PACKAGES)[number] => pkg !== undefined);
}

/**
 * Whether bubblewrap can make the namespaces the sandbox needs on this host: a container's default seccomp profile, a
 * masked /proc or a kernel that restricts unprivileged user namespaces stops it even with the packages installed.
 * Resolves to what bubblewrap said when it could not, else undefined (also outside Linux).
 */
export async function probeSandbox(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<string | undefined> {
  if (platform !== 'linux') return undefined;
  const bwrap = await findExecutable('bwrap', env);
  if (!bwrap) return 'bubblewrap is not installed';
  const probe = await execa(bwrap, ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-all', '--die-with-parent', '--', 'true'], {
    reject: false,
    timeout: 10_000,
    stdin: 'ignore',
    env: { PATH: env.PATH ?? '' },
    extendEnv: false,
  });
  return probe.exitCode === 0 ? undefined : (String(probe.stderr).trim().split('\n').at(-1) ?? '') || `bwrap exited with code ${probe.exitCode}`;
}

/** What a host offers the sandbox: the packages it lacks, or why bubblewrap cannot make its namespaces there. */
export interface SandboxHost {
  missing: string[];
  refused?: string;
}

/** Whether the host can run the sandbox. */
export const sandboxHostReady = (host: SandboxHost): boolean => host.missing.length === 0 && host.refused === undefined;

/** Checks a host: its packages, then (with them) whether bubblewrap can start there. */
export async function checkSandboxHost(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): Promise<SandboxHost> {
  const missing = await missingSandboxPackages(env, platform);
  if (missing.length > 0) return { missing };
  const refused = await probeSandbox(env, platform);
  return refused ? { missing, refused } : { missing };
}

/**
 * How long a worker believes a host that cannot sandbox before it checks again: long enough that a burst of attempts
 * shares one check, short enough that packages installed on a running worker are used within seconds. @unit milliseconds
 */
export const SANDBOX_RECHECK_MS = 5_000;

/** Options of {@link sandboxHostChecker}. */
export interface SandboxHostCheckerOptions {
  /** How long a negative answer holds before the host is checked again. @unit milliseconds @default SANDBOX_RECHECK_MS */
  recheckMs?: number;
  /** The check itself. @default checkSandboxHost(env) */
  check?: () => Promise<SandboxHost>;
  /** The clock. @unit milliseconds since the epoch @default Date.now */
  now?: () => number;
}

/**
 * A worker's view of its host. A host that can sandbox is believed for the worker's life (Claude Code itself refuses
 * to start where the sandbox then fails, `failIfUnavailable`); one that cannot is checked again once its answer is
 * `recheckMs` old, before any stage is failed or run unsandboxed for it. Callers at the same time share one check.
 */
export function sandboxHostChecker(env: NodeJS.ProcessEnv, options: SandboxHostCheckerOptions = {}): () => Promise<SandboxHost> {
  const { recheckMs = SANDBOX_RECHECK_MS, check = () => checkSandboxHost(env), now = Date.now } = options;
  let answer: { host: SandboxHost; at: number } | undefined;
  let checking: Promise<SandboxHost> | undefined;
  return async () => {
    if (answer && (sandboxHostReady(answer.host) || now() - answer.at < recheckMs)) return answer.host;
    // A check that throws leaves the last answer as it was; the next caller checks again.
    checking ??= check()
      .then((host) => (answer = { host, at: now() }).host)
      .finally(() => (checking = undefined));
    return await checking;
  };
}
