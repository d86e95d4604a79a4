import { defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/helpers/slow-first-sequencer.js';

/**
 * The suite's config. The integration files share one Temporal dev server, whose address they read with
 * inject('temporalAddress'): the one global-setup.ts starts for the run, or `temporalAddress`, a server already running
 * (a vitest run that a test starts: test/helpers/vitest-child.config.ts).
 */
export function suiteConfig(temporalAddress?: string) {
  // In the integration project, not at the root: a root setup ran once more for each project extending it (three
  // servers, two of them idle, and two for a run of unit files alone).
  const temporal = temporalAddress ? { provide: { temporalAddress } } : { globalSetup: ['test/helpers/global-setup.ts'] };
  return defineConfig({
    test: {
      testTimeout: 120_000,
      // Each file's CPU time, for .ci/run's report (only when AGENT_PIPELINE_TEST_CPU_REPORT is set).
      setupFiles: ['test/helpers/file-cpu.ts'],
      // beforeAll hooks bundle workflow code with webpack, which takes minutes on a loaded 2-core machine.
      hookTimeout: 300_000,
      // Forks, not threads: tests spawn processes and the Temporal worker's native runtime, which behave best in
      // their own process.
      pool: 'forks',
      // Four files at a time on a 2-core box (issue 32): an integration file mostly waits (Temporal timers, agents,
      // people; limits-run-life used a fifth of a core), and the workflow code comes prebuilt from dist/, so four
      // overlap their waits where two left the cores idle. Measured on a loaded machine: 16 files in 196 s with four
      // workers, 272 s with two. On a machine busy with other work: `VITEST_MAX_WORKERS=2 npm test` (the projects below take
      // this value, not `--maxWorkers` of the command line, which vitest 4 gives the root config alone).
      fileParallelism: true,
      maxWorkers: 4,
      // The slow files first, so that they overlap the short ones rather than run alone at the end (issue 32).
      sequence: { sequencer: SlowFirstSequencer },
      // The cluster test (test/cluster/) has its own run: `npm run test:cluster`, vitest.cluster.config.ts.
      projects: [
        // Test files share their worker processes and modules (isolate: false): each file in a fresh process spent more
        // CPU loading the same modules again than running its tests. Unit files: 68 → 40 CPU-s for the 106 files;
        // integration files: the whole run 899 → 757 CPU-s (issue 32). So a file must leave its process as it found it:
        // environment variables restored, spies restored, no call left running on a connection it closes.
        { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false } },
        {
          extends: true,
          test: { name: 'integration', include: ['test/integration/**/*.test.ts', 'test/replay/**/*.test.ts'], isolate: false, ...temporal },
        },
      ],
    },
  });
}

export default suiteConfig();
