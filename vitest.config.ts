import { configDefaults, defineConfig } from 'vitest/config';

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
  },
});
