import { configDefaults, defineConfig } from 'vitest/config';
import SlowFirstSequencer from './test/helpers/slow-first-sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The cluster test has its own run (`npm run test:cluster`, vitest.cluster.config.ts).
    exclude: [...configDefaults.exclude, 'test/cluster/**'],
    // One Temporal dev server for the whole run; tests read its address with inject('temporalAddress').
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 120_000,
    // beforeAll hooks bundle workflow code with webpack, which takes minutes on a loaded 2-core machine.
    hookTimeout: 300_000,
    // Forks, not threads: tests spawn processes and the Temporal worker's native runtime, which behave best in
    // their own process.
    pool: 'forks',
    // Two files at a time: enough to overlap one file's waiting with another's work, while the dev server,
    // webpack bundling and the agent CLI processes still get a core; more only adds timeouts on a 2-core box.
    fileParallelism: true,
    maxWorkers: 2,
    // The slow files first, so that they overlap the short ones rather than run alone at the end (issue 32).
    sequence: { sequencer: SlowFirstSequencer },
  },
});
