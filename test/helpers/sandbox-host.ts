import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { missingSandboxPackages } from '../../src/activities/backends/claude-cli/sandbox-host.js';
import type { SandboxMode } from '../../src/activities/backends/claude-cli/sandbox-mode.js';
import { linkCommands, linkPathWithout } from './system-package.js';

/** The sandbox packages this machine lacks, as its PATH shows them (none in CI: `.ci/run` installs bubblewrap and socat). */
export const MISSING_SANDBOX_PACKAGES = await missingSandboxPackages(process.env);

/**
 * The sandbox mode of the tests' workers, set explicitly since a worker's default (`required`) fails Bash stages on a
 * machine without the packages: `auto`, so every CLI test runs its agents' Bash in the sandbox; `off` on a machine
 * without one of the packages (or both), so agents run as before without a warning in every stage result, and the
 * sandbox tests say once that they were skipped.
 */
export function testSandboxMode(missing: readonly string[]): SandboxMode {
  return missing.length > 0 ? 'off' : 'auto';
}
export const TEST_SANDBOX_MODE: SandboxMode = testSandboxMode(MISSING_SANDBOX_PACKAGES);

/** The same for a worker whose runs' stages may say `sandbox: false` (the work-and-review example's `record`). */
export const TEST_PERMISSIVE_SANDBOX_MODE: SandboxMode = MISSING_SANDBOX_PACKAGES.length > 0 ? 'off' : 'permissive';

/** A PATH that stands for a host without some programs, which can be installed on it later. */
export interface HiddenPrograms {
  /** The PATH: one folder of links to every program of this machine's PATH but the hidden ones. */
  path: string;
  /** Links a hidden program into the folder: the host now has it. */
  install(name: string): Promise<void>;
  remove(): Promise<void>;
}

/** A PATH without `names` (as `bwrap` or `socat`: a host without the sandbox's packages), built from this machine's PATH. */
export async function pathWithout(names: readonly string[]): Promise<HiddenPrograms> {
  const dir = await linkPathWithout(names, await mkdtemp(path.join(tmpdir(), 'agent-pipeline-path-')));
  return {
    path: dir,
    async install(name) {
      await linkCommands([name], dir);
      if (!existsSync(path.join(dir, name))) throw new Error(`${name} is not on this machine's PATH, so it cannot be installed on the test's`);
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
