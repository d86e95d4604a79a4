import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
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
const root = fileURLToPath(new URL('../..', import.meta.url));

/*
 * The child runs of one suite run load the same modules (system-packages-hidden.test.ts starts two with this config): each vitest
 * transformed all of them again, 1-2 CPU-s a run (issue 32). Vitest's file cache of transformed modules shares them:
 * an entry is named by the module's path, its content and the config, and written whole (then renamed), so a changed
 * file is transformed afresh. In the temp dir, one folder per checkout (vitest clears it when the lockfile changes).
 */
const moduleCache = path.join(tmpdir(), 'agent-pipeline-vitest-child-cache', createHash('sha256').update(root).digest('hex').slice(0, 12));

export default address
  ? defineConfig({ ...config, test: { ...config.test, root, experimental: { fsModuleCache: true, fsModuleCachePath: moduleCache } } })
  : config;
