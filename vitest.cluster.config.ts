import { defineConfig } from 'vitest/config';

// `npm run test:cluster`: the compose topology as real processes (test/cluster/). Its own run, outside `npm test`:
// a first run builds the Temporal server from source, and the test itself takes minutes.
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    // Building the server from its Go module on a 2-core machine, then PostgreSQL, the schema and the server.
    hookTimeout: 75 * 60_000,
    testTimeout: 40 * 60_000,
  },
});
