#!/usr/bin/env node
/**
 * `npm run bench`: runs every benchmark against one Temporal dev server started here, the real `claude`
 * binary and the scripted model server, and writes bench/results/latest.json and latest.md.
 * `-- --only overhead,throughput` runs a subset and `-- --quick` a smoke test with fewer repetitions;
 * both write bench/results/partial.* instead, so latest.* always holds one complete run. A complete run also
 * refreshes the summary table in docs/performance.md.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { BENCHMARKS, type BenchContext } from './benchmarks/index.js';
import { describeEnvironment, readCpuPressure } from './lib/environment.js';
import { updateReadmeSummary, writeReport, type BenchmarkResult } from './lib/results.js';
import { BenchStack, PROJECT_ROOT } from './lib/stack.js';
import { elapsedMs, firstLine, round } from './lib/stats.js';

/** Sets this process's nice value, which every process it starts inherits; describeEnvironment records the result. */
function raisePriority(nice: number): void {
  try {
    os.setPriority(nice);
  } catch {
    // Needs root or CAP_SYS_NICE; run at the inherited priority.
  }
}

const { values } = parseArgs({ options: { only: { type: 'string' }, quick: { type: 'boolean', default: false } } });
const names = BENCHMARKS.map((b) => b.name);
const only = values.only?.split(',').map((s) => s.trim()).filter(Boolean);
const unknown = only?.filter((name) => !names.includes(name)) ?? [];
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown benchmark ${unknown.join(', ')}; choose from ${names.join(', ')}\n`);
  process.exit(2);
}

const log = (line: string): void => void process.stderr.write(`[bench] ${line}\n`);
// Other work on a shared machine moves timings by tens of per cent. A higher priority (inherited by the dev server,
// the workers, the agents and the baseline loops alike) keeps the comparison about our code, not about the neighbours.
raisePriority(Number(process.env.BENCH_NICE ?? -20));
const runStartNs = process.hrtime.bigint();
const environment = await describeEnvironment();
log(`${environment.cores} cores, Node ${environment.nodeVersion}, Claude Code ${environment.claudeCliVersion}; load ${environment.loadAverage.start}; nice ${environment.niceness}`);
const stack = await BenchStack.start(log);
log(`Temporal dev server ${stack.devServer.address}, model server ${stack.modelServer.url}, scratch ${stack.scratch}`);

const context: BenchContext = { stack, quick: values.quick, log, shared: {} };
const results: BenchmarkResult[] = [];
try {
  for (const benchmark of BENCHMARKS) {
    if (only && !only.includes(benchmark.name)) continue;
    log(`${benchmark.name}: running`);
    const startNs = process.hrtime.bigint();
    let result: BenchmarkResult;
    try {
      result = await benchmark.run(context);
    } catch (err) {
      // A benchmark that cannot finish is a finding too: it is reported, and the others still run.
      result = {
        name: benchmark.name,
        title: benchmark.title,
        method: '',
        repetitions: 0,
        headline: 'did not finish',
        goal: { text: benchmark.goal, met: benchmark.goal === 'report' ? null : false },
        figures: {},
        notes: [],
        durationS: 0,
        error: firstLine(err, 2_000),
      };
    }
    result.durationS = round(elapsedMs(startNs) / 1000);
    results.push(result);
    log(`${benchmark.name}: ${result.headline}${result.error ? ` — ${result.error}` : ''} (${result.durationS} s)`);
    (globalThis as { gc?: () => void }).gc?.();
  }
} finally {
  // After a failure the workers' logs explain it; keep them.
  const failed = results.some((r) => r.error);
  await stack.close(failed);
  if (failed) log(`scratch folder with the worker logs kept: ${stack.scratch}`);
}

environment.loadAverage.end = round(os.loadavg()[0], 2);
environment.cpuPressure.end = readCpuPressure();
const partial = Boolean(only) || values.quick;
const report = {
  generatedAt: new Date().toISOString(),
  durationS: round(elapsedMs(runStartNs) / 1000),
  command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
  environment,
  benchmarks: results,
};
const files = await writeReport(report, path.join(PROJECT_ROOT, 'bench', 'results'), partial ? 'partial' : 'latest');
const summaryPage = path.join(PROJECT_ROOT, 'docs', 'performance.md');
if (!partial && (await updateReadmeSummary(summaryPage, report))) files.push(summaryPage);
log(`wrote ${files.map((f) => path.relative(PROJECT_ROOT, f)).join(', ')}`);
