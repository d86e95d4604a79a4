import { existsSync } from 'node:fs';

/*
 * Tests that need a system package the project cannot install through npm (a browser, a database server). On a
 * machine without it they are skipped with one plain line naming the package and the command that installs it, so
 * that the README's `npm ci && npm test` passes on a fresh machine. In CI (`CI` set, as `.ci/run` sets it, after
 * installing them) a missing package fails the test instead: there they must always run.
 */

export interface SystemPackage {
  /** The package, as a person installs it (`chromium`). */
  name: string;
  /** The file whose presence means it is installed. */
  file: string;
  /** The command that installs it. */
  install: string;
  /** What needs it, for the line. */
  neededBy: string;
}

/**
 * Whether `pkg` is installed. When it is not: outside CI, writes the skip line and returns `false`; in CI, throws.
 * @throws Error naming the package and its install command, in CI only
 */
export function hasSystemPackage(pkg: SystemPackage): boolean {
  if (existsSync(pkg.file)) return true;
  const line = `${pkg.neededBy} needs ${pkg.name} (${pkg.file} is missing): install it with \`${pkg.install}\``;
  if (process.env.CI) throw new Error(`${line}; CI (.ci/run) installs it, so it must be here`);
  process.stderr.write(`skipped: ${line}\n`);
  return false;
}

/** Debian's Chromium, which the Web UI test drives with playwright-core. */
export const CHROMIUM: SystemPackage = {
  name: 'chromium',
  file: '/usr/bin/chromium',
  install: 'sudo apt-get update && sudo apt-get install -y chromium',
  neededBy: 'test/integration/workflow-webui.test.ts',
};

/** Debian's PostgreSQL 15, which the cluster test runs Temporal's server on. */
export const POSTGRESQL: SystemPackage = {
  name: 'PostgreSQL 15',
  file: '/usr/lib/postgresql/15/bin/initdb',
  install: 'sudo apt-get update && sudo apt-get install -y postgresql-15',
  neededBy: 'test/cluster/cluster.test.ts (npm run test:cluster)',
};
