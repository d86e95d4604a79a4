import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, test, vi } from 'vitest';
import { missingSandboxPackages } from '../../src/activities/backends/claude-cli/sandbox-host.js';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { testSandboxMode } from '../helpers/sandbox-host.js';
import { CHILD_TEMPORAL_VARIABLE } from '../helpers/vitest-child.config.js';
import {
  CHROMIUM,
  GO,
  hasSystemPackage,
  HIDE_VARIABLE,
  hiddenPackages,
  linkCommands,
  linkPathWithout,
  POSTGRESQL,
  SYSTEM_PACKAGES,
  type SystemPackageKey,
} from '../helpers/system-package.js';

/*
 * Issue 32: on a machine without chromium, PostgreSQL and bubblewrap, `npm test` failed two tests that hid socat and
 * took bubblewrap for granted. Every test that depends on a system package (chromium, PostgreSQL 15, bubblewrap,
 * socat, go) must hold on a machine with none, some or all of them: the package's own tests skip with their one
 * line (outside CI), the others pass, none fails. This checks it on this machine by hiding packages: a PATH whose
 * folder links every program of this machine's PATH but the hidden packages' (what the worker's own checks see), and
 * AGENT_PIPELINE_TEST_HIDE naming them (what test/helpers/system-package.ts sees, since some live at fixed paths).
 * "All present" is the rest of the suite. The decisions are checked for every combination; the tests themselves run
 * in a child vitest, only their conditional parts (`-t`), so this stays fast. Without bubblewrap or socat every CLI
 * test runs its agents unsandboxed (test/helpers/sandbox-host.ts); the one that failed so is run here that way too.
 * By hand, as a machine without any: PATH=<a folder of links to every program on PATH but theirs>
 * AGENT_PIPELINE_TEST_HIDE=chromium,postgresql,bubblewrap,socat,go npx vitest run FILE.
 */

const VITEST = path.join(PROJECT_ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const CHILD_CONFIG = path.join(PROJECT_ROOT, 'test', 'helpers', 'vitest-child.config.ts');
const ALL: SystemPackageKey[] = SYSTEM_PACKAGES.map((pkg) => pkg.key);
/** What this very run hides already (this check run by hand as a machine without them, with a PATH to match). */
const OUTER_HIDDEN = hiddenPackages();

let scratch: string;
/** This machine's PATH without any of the packages' programs. */
let bare: string;
/** Per package, a folder with just its programs (those this machine has on PATH). */
const only = new Map<SystemPackageKey, string>();
/** What this machine has, as the tests would see it with nothing hidden. */
const machine = new Map<SystemPackageKey, boolean>();

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'system-packages-hidden-'));
  bare = await linkPathWithout(
    SYSTEM_PACKAGES.flatMap((pkg) => pkg.commands),
    path.join(scratch, 'bare'),
  );
  for (const pkg of SYSTEM_PACKAGES) {
    only.set(pkg.key, await linkCommands(pkg.commands, path.join(scratch, pkg.key)));
    machine.set(pkg.key, pkg.locate(process.env) !== undefined && !OUTER_HIDDEN.includes(pkg.key));
  }
});
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** The environment of a machine like this one without `hidden`. */
function hiding(hidden: readonly SystemPackageKey[]): NodeJS.ProcessEnv {
  const dirs = [bare, ...SYSTEM_PACKAGES.filter((pkg) => !hidden.includes(pkg.key)).map((pkg) => only.get(pkg.key)!)];
  return { PATH: dirs.join(path.delimiter), [HIDE_VARIABLE]: [...new Set([...OUTER_HIDDEN, ...hidden])].join(',') };
}

const has = (key: SystemPackageKey, hidden: readonly SystemPackageKey[]): boolean => machine.get(key)! && !hidden.includes(key);

describe('with system packages hidden', () => {
  test('every combination decides as a machine without them would: skips, the sandbox packages and the workers\' sandbox mode', async () => {
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      for (let mask = 0; mask < 1 << ALL.length; mask++) {
        const hidden = ALL.filter((_, i) => mask & (1 << i));
        const env = hiding(hidden);
        const where = `hiding ${hidden.join(', ') || 'nothing'}`;
        for (const pkg of [CHROMIUM, POSTGRESQL, GO]) expect(hasSystemPackage(pkg, env), `${pkg.name}, ${where}`).toBe(has(pkg.key, hidden));
        const missing = (['bubblewrap', 'socat'] as const).filter((key) => !has(key, hidden));
        expect(await missingSandboxPackages(env, 'linux'), where).toEqual(missing);
        expect(testSandboxMode(missing), where).toBe(missing.length > 0 ? 'off' : 'auto');
      }
    } finally {
      vi.restoreAllMocks();
    }
  });

  interface ChildRun {
    exitCode: number | undefined;
    output: string;
    /** Each test's full name and status (passed, failed, skipped), and why it failed. */
    tests: { name: string; status: string; failure?: string }[];
  }

  let runs = 0;
  /** Runs vitest in a child process, outside CI (where a missing package skips), on a machine like this without `hidden`. */
  async function vitest(hidden: SystemPackageKey[], args: string[], extra: NodeJS.ProcessEnv = {}): Promise<ChildRun> {
    const report = path.join(scratch, `report-${++runs}.json`);
    const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => key !== 'CI' && !key.startsWith('VITEST')));
    const without = hiding(hidden);
    // node_modules/.bin first, as `npm test` puts it there (the tests' `claude`).
    without.PATH = [path.join(PROJECT_ROOT, 'node_modules', '.bin'), without.PATH].join(path.delimiter);
    // The suite's own files run on this run's Temporal dev server (test/helpers/vitest-child.config.ts).
    const config = args.includes('--config') ? [] : ['--config', CHILD_CONFIG];
    // One worker process, which runs all its files (the suite's isolate: false): it runs inside one of the outer run's
    // workers, beside the others, and a process of each file's own cost 1.5-2.5 CPU-s to start and load the same
    // modules again. Through VITEST_MAX_WORKERS: vitest 4 does not give the suite's projects `--maxWorkers` (it ran
    // four at once with `--maxWorkers=2`).
    const child = await execa(process.execPath, [VITEST, 'run', ...config, ...args, '--reporter=json', `--outputFile=${report}`], {
      cwd: PROJECT_ROOT,
      env: { ...env, ...without, [CHILD_TEMPORAL_VARIABLE]: inject('temporalAddress'), VITEST_MAX_WORKERS: '1', ...extra },
      extendEnv: false,
      reject: false,
      all: true,
      stdin: 'ignore',
      timeout: 240_000,
    });
    const output = String(child.all);
    if (!existsSync(report)) throw new Error(`vitest ${args.join(' ')} wrote no report (exit ${child.exitCode}):\n${output}`);
    type Result = { fullName: string; status: string; failureMessages?: string[] };
    const json = JSON.parse(await readFile(report, 'utf8')) as { testResults: { assertionResults: Result[] }[] };
    const tests = json.testResults.flatMap((file) =>
      file.assertionResults.map((t) => ({ name: t.fullName, status: t.status, ...(t.failureMessages?.length ? { failure: t.failureMessages.join('\n') } : {}) })),
    );
    return { exitCode: child.exitCode, output, tests };
  }

  /** The status of the one test whose name contains `part`. */
  function statusOf(run: ChildRun, part: string): string {
    const found = run.tests.filter((t) => t.name.includes(part));
    expect(found, `one test named …${part}… in ${JSON.stringify(run.tests)}`).toHaveLength(1);
    return found[0]!.status;
  }

  function expectNoFailure(run: ChildRun): void {
    expect(run.tests.filter((t) => t.status === 'failed'), run.output).toEqual([]);
    expect(run.exitCode, run.output).toBe(0);
  }

  const SANDBOX_PROBE = "keeps the worker's secrets";
  const SOCAT_CASES = ['fails a Bash stage with SANDBOX_UNAVAILABLE naming socat', 'runs it unsandboxed with `auto`'];

  /** A CLI test whose agent, unsandboxed, could finish before it was stopped (it failed without bubblewrap once). */
  const UNSANDBOXED_STOP = 'stops an earlier attempt still working in the stage';

  test('without chromium, bubblewrap and go, the Web UI tests and the sandbox probe skip with their lines, the socat cases and an unsandboxed stop pass', { timeout: 300_000 }, async () => {
    const files = ['workflow-webui', 'encrypted-history', 'claude-cli-sandbox', 'claude-cli'].map((name) => `test/integration/${name}.test.ts`);
    const run = await vitest(['chromium', 'bubblewrap', 'go'], [...files, '-t', `Web UI|${SANDBOX_PROBE}|host lacks socat|${UNSANDBOXED_STOP}`]);
    expectNoFailure(run);
    expect(statusOf(run, UNSANDBOXED_STOP)).toBe('passed');
    expect(statusOf(run, 'the Temporal Web UI')).toBe('skipped');
    expect(statusOf(run, 'the Web UI, through the codec server')).toBe('skipped');
    expect(statusOf(run, SANDBOX_PROBE)).toBe('skipped');
    for (const name of SOCAT_CASES) expect(statusOf(run, name), run.output).toBe('passed');
    expect(run.output).toContain(`skipped: ${CHROMIUM.neededBy} needs chromium (hidden by ${HIDE_VARIABLE})`);
    expect(run.output).toMatch(/skipped: the sandbox probe of \S+ needs bubblewrap( and socat)? \(not on PATH\)/);
  });

  test('without socat, the sandbox probe skips with its line and the socat cases pass', { timeout: 300_000 }, async () => {
    const run = await vitest(['socat'], ['test/integration/claude-cli-sandbox.test.ts', '-t', `${SANDBOX_PROBE}|host lacks socat`]);
    expectNoFailure(run);
    expect(statusOf(run, SANDBOX_PROBE)).toBe('skipped');
    for (const name of SOCAT_CASES) expect(statusOf(run, name), run.output).toBe('passed');
    expect(run.output).toMatch(/skipped: the sandbox probe of \S+ needs (bubblewrap and )?socat \(not on PATH\)/);
  });

  test('without PostgreSQL 15, the cluster test skips with its line', { timeout: 120_000 }, async () => {
    const run = await vitest(['postgresql'], ['--config', 'vitest.cluster.config.ts']);
    expectNoFailure(run);
    expect(run.tests.length).toBeGreaterThan(0);
    expect(run.tests.filter((t) => t.status !== 'skipped')).toEqual([]);
    expect(run.output).toContain(`skipped: ${POSTGRESQL.neededBy} needs PostgreSQL 15 (hidden by ${HIDE_VARIABLE})`);
  });

  test('without go and a cached Temporal server, the cluster test skips with its line rather than fail building one', { timeout: 120_000 }, async () => {
    // An empty state folder: no cached server binaries (nor anything else the cluster test would reuse).
    const run = await vitest(['go'], ['--config', 'vitest.cluster.config.ts'], { AGENT_PIPELINE_HOME: await mkdtemp(path.join(scratch, 'home-')) });
    expectNoFailure(run);
    expect(run.tests.filter((t) => t.status !== 'skipped')).toEqual([]);
    // Where PostgreSQL is missing too, its line comes first and the test stops there.
    if (machine.get('postgresql')) expect(run.output).toContain(`skipped: ${GO.neededBy} needs ${GO.name} (hidden by ${HIDE_VARIABLE})`);
    else expect(run.output).toContain(`${POSTGRESQL.neededBy} needs PostgreSQL 15 (`);
  });
});
