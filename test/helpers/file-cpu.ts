/*
 * Records the CPU time each test file cost, when AGENT_PIPELINE_TEST_CPU_REPORT names a file (.ci/run sets it and
 * prints the ten hungriest files; issue 32). The suite keeps both cores of a small machine busy, so a file's
 * CPU-seconds, not its wall time, is what it costs the run: wall time mostly says how long it waited beside others.
 *
 * A file's figure is its vitest worker's CPU over the file plus that of every process the worker waited for meanwhile
 * (CLI commands, worker processes, `claude`, git…; Linux's /proc/self/stat), not the shared Temporal server's. A
 * setup file's afterAll runs after the file's own (vitest runs after-hooks in reverse), so it counts their clean-up.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

const REPORT = process.env.AGENT_PIPELINE_TEST_CPU_REPORT;

/** utime + stime + cutime + cstime of this process, in clock ticks (100 a second on Linux). */
function cpuTicks(): number {
  const afterName = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return afterName.slice(11, 15).reduce((sum, value) => sum + Number(value), 0);
}

if (REPORT && process.platform === 'linux') {
  let start = 0;
  beforeAll(() => {
    start = cpuTicks();
  });
  afterAll(() => {
    const file = path.relative(process.cwd(), expect.getState().testPath ?? 'unknown');
    appendFileSync(REPORT, `${((cpuTicks() - start) / 100).toFixed(1)}\t${file}\n`);
  });
}
