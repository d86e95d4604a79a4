import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs';
import { mkdir, readdir, symlink } from 'node:fs/promises';
import path from 'node:path';

/*
 * Tests that need a system package the project cannot install through npm (a browser, a database server, a
 * toolchain). On a machine without it they are skipped with one plain line naming the package and the command that
 * installs it, so that the README's `npm ci && npm test` passes on a fresh machine. In CI (`CI` set, as `.ci/run`
 * sets it, after installing them) a missing package fails the test instead: there they must always run.
 *
 * Every such test must hold on a machine with none, some or all of the packages. test/integration/system-packages-
 * hidden.test.ts checks that by running them with packages hidden: a PATH without their programs (what the worker's
 * own checks see, such as the sandbox's) and AGENT_PIPELINE_TEST_HIDE naming them (what `hasSystemPackage` sees,
 * since some live at a fixed path no PATH hides).
 */

/** The packages the tests may need; the keys AGENT_PIPELINE_TEST_HIDE takes. */
export type SystemPackageKey = 'chromium' | 'postgresql' | 'bubblewrap' | 'socat' | 'go';

/** Test-only: comma-separated {@link SystemPackageKey}s that `hasSystemPackage` treats as not installed. */
export const HIDE_VARIABLE = 'AGENT_PIPELINE_TEST_HIDE';

export interface SystemPackage {
  key: SystemPackageKey;
  /** The package, as a person installs it (`chromium`). */
  name: string;
  /** Its programs that may be on PATH: what a PATH that hides it leaves out. */
  commands: readonly string[];
  /** Its fixed path, for a package found there rather than on PATH. */
  file?: string;
  /** Where it is installed on this machine (`env` for a PATH lookup), or undefined. */
  locate(env: NodeJS.ProcessEnv): string | undefined;
  /** What the skip line says is missing (`/usr/bin/chromium is missing`). */
  missing: string;
  /** How to install it, as the line says it after "install it with" (a command in backquotes). */
  install: string;
  /** What needs it, for the line. */
  neededBy: string;
}

/** The keys `env` hides. */
export function hiddenPackages(env: NodeJS.ProcessEnv = process.env): SystemPackageKey[] {
  return (env[HIDE_VARIABLE] ?? '')
    .split(',')
    .map((key) => key.trim())
    .filter((key): key is SystemPackageKey => key !== '');
}

/**
 * Whether `pkg` is installed (and not hidden). When it is not: outside CI, writes the skip line and returns `false`;
 * in CI, throws.
 * @throws Error naming the package and its install command, in CI only
 */
export function hasSystemPackage(pkg: SystemPackage, env: NodeJS.ProcessEnv = process.env): boolean {
  const hidden = hiddenPackages(env).includes(pkg.key);
  if (!hidden && pkg.locate(env)) return true;
  const why = hidden ? `hidden by ${HIDE_VARIABLE}` : pkg.missing;
  const line = `${pkg.neededBy} needs ${pkg.name} (${why}): install it with ${pkg.install}`;
  if (env.CI) throw new Error(`${line}; in CI (.ci/run) every system package must be here`);
  process.stderr.write(`skipped: ${line}\n`);
  return false;
}

/** The first executable `command` in `dirs`, as a shell finds it. */
function findIn(command: string, dirs: readonly string[]): string | undefined {
  for (const dir of dirs) {
    const file = path.join(dir, command);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return undefined;
}
const pathDirs = (env: NodeJS.ProcessEnv): string[] => (env.PATH ?? '').split(path.delimiter).filter(Boolean);
/** A package found at a fixed path. */
const atPath = (file: string): Pick<SystemPackage, 'file' | 'locate' | 'missing'> => ({
  file,
  locate: () => (existsSync(file) ? file : undefined),
  missing: `${file} is missing`,
});

/** Debian's Chromium, which the Web UI tests drive with playwright-core. */
export const CHROMIUM: SystemPackage = {
  key: 'chromium',
  name: 'chromium',
  commands: ['chromium'],
  ...atPath('/usr/bin/chromium'),
  install: '`sudo apt-get update && sudo apt-get install -y chromium`',
  neededBy: 'each Web UI test (test/integration/workflow-webui.test.ts, encrypted-history.test.ts)',
};
/** Debian's PostgreSQL 15, which the cluster test runs Temporal's server on (its programs are not on PATH). */
export const POSTGRESQL: SystemPackage = {
  key: 'postgresql',
  name: 'PostgreSQL 15',
  commands: ['initdb', 'pg_ctl', 'postgres', 'psql'],
  ...atPath('/usr/lib/postgresql/15/bin/initdb'),
  install: '`sudo apt-get update && sudo apt-get install -y postgresql-15`',
  neededBy: 'test/cluster/cluster.test.ts (npm run test:cluster)',
};

/** Go, which builds the cluster test's Temporal server when it is not cached (test/cluster/server-binaries.ts looks where this does). */
export const GO: SystemPackage = {
  key: 'go',
  name: 'Go 1.21 or later',
  commands: ['go', 'gofmt'],
  locate: (env) => findIn('go', [...pathDirs(env), '/usr/local/go/bin']),
  missing: '`go` is on neither PATH nor /usr/local/go/bin',
  install: "an official Go release in /usr/local/go (Debian 12's golang-go, Go 1.19, is too old)",
  neededBy: 'test/cluster/cluster.test.ts (npm run test:cluster), to build the Temporal server it has not cached,',
};

/** bubblewrap and socat: Claude Code's sandbox (the worker finds them on PATH; test/helpers/sandbox-host.ts). */
export const BUBBLEWRAP: SystemPackage = {
  key: 'bubblewrap',
  name: 'bubblewrap',
  commands: ['bwrap'],
  locate: (env) => findIn('bwrap', pathDirs(env)),
  missing: '`bwrap` is not on PATH',
  install: '`sudo apt-get install -y bubblewrap`',
  neededBy: 'test/integration/claude-cli-sandbox.test.ts',
};
export const SOCAT: SystemPackage = {
  key: 'socat',
  name: 'socat',
  commands: ['socat'],
  locate: (env) => findIn('socat', pathDirs(env)),
  missing: '`socat` is not on PATH',
  install: '`sudo apt-get install -y socat`',
  neededBy: 'test/integration/claude-cli-sandbox.test.ts',
};

/** Every system package a test may need. */
export const SYSTEM_PACKAGES: readonly SystemPackage[] = [CHROMIUM, POSTGRESQL, BUBBLEWRAP, SOCAT, GO];

/**
 * Fills the folder `into` with links to every program on `env`'s PATH except those named in `hidden`, the first
 * PATH entry winning as in a shell; returns it, to be used as a PATH of its own (to a program looking on it, a
 * machine without those programs).
 */
export async function linkPathWithout(hidden: readonly string[], into: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  await mkdir(into, { recursive: true });
  const skip = new Set(hidden);
  // A folder on PATH twice (Debian's /bin is /usr/bin) gives nothing the first time did not: a link per program is
  // thousands of files (a share of the suite's CPU in ext4's inode allocation), so each folder is linked once.
  const folders = new Set(pathDirs(env).map((dir) => (existsSync(dir) ? realpathSync(dir) : dir)));
  for (const dir of folders) {
    for (const name of await readdir(dir).catch(() => [])) {
      if (!skip.has(name)) await symlink(path.join(dir, name), path.join(into, name)).catch(() => undefined);
    }
  }
  return into;
}

/** Fills `into` with links to just `commands`, as found on `env`'s PATH (those it has). */
export async function linkCommands(commands: readonly string[], into: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  await mkdir(into, { recursive: true });
  for (const command of commands) {
    const found = findIn(command, pathDirs(env));
    if (found) await symlink(found, path.join(into, command));
  }
  return into;
}
