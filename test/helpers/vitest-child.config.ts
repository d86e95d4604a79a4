import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { suiteConfig } from '../../vitest.config.js';

/** The outer run's Temporal dev server, for a vitest run started by a test (system-packages-hidden.test.ts). */
export const CHILD_TEMPORAL_VARIABLE = 'AGENT_PIPELINE_TEST_TEMPORAL_ADDRESS';

/*
 * The suite's config for a vitest run that a test starts inside the suite: given the outer run's Temporal dev server,
 * the tests use it instead of starting one of their own (a second server cost each such run a CPU second). Without
 * it, this is the suite's config.
 */
const address = process.env[CHILD_TEMPORAL_VARIABLE];
const config = suiteConfig(address);

export default address ? defineConfig({ ...config, test: { ...config.test, root: fileURLToPath(new URL('../..', import.meta.url)) } }) : config;
