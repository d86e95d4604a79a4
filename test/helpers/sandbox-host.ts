import { missingSandboxPackages, type SandboxMode } from '../../src/activities/backends/claude-cli/agent-settings.js';

/** The sandbox packages this machine lacks, as its PATH shows them (none in CI: `.ci/run` installs bubblewrap and socat). */
export const MISSING_SANDBOX_PACKAGES = await missingSandboxPackages(process.env);

/**
 * The sandbox mode of the tests' workers: `auto` (a worker's default), so every CLI test runs its agents' Bash in the
 * sandbox; `off` on a machine without one of the packages (or both), so agents run as before without a warning in
 * every stage result, and the sandbox tests say once that they were skipped.
 */
export function testSandboxMode(missing: readonly string[]): SandboxMode {
  return missing.length > 0 ? 'off' : 'auto';
}
export const TEST_SANDBOX_MODE: SandboxMode = testSandboxMode(MISSING_SANDBOX_PACKAGES);
