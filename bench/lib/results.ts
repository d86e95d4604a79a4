import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../src/activities/workspace/run-workspace.js';

/** A value in a benchmark's figures: numbers are in the unit their key names (`Ms`, `Mb`, `PerS`). */
export type Figure = number | string | boolean | null | Figure[] | { [key: string]: Figure };

/** What one benchmark reports. */
export interface BenchmarkResult {
  /** Stable key, e.g. `overhead`. */
  name: string;
  title: string;
  /** How it was measured, in a sentence or two. */
  method: string;
  /** How many times the measured thing was repeated; each figure is the median over them unless named otherwise. */
  repetitions: number;
  /** The headline figure, as shown in the table. */
  headline: string;
  /** The goal from the issue, and whether the headline met it; `met` is null for report-only benchmarks. */
  goal: { text: string; met: boolean | null };
  figures: Record<string, Figure>;
  /** A detail table for the readable results (e.g. one row per concurrency level). */
  table?: { columns: string[]; rows: (string | number)[][] };
  notes: string[];
  /** Wall time the benchmark took. @unit seconds */
  durationS: number;
  /** Set when the benchmark could not finish; figures then hold what was measured before. */
  error?: string;
}

/** The machine and versions a run was measured on. */
export interface BenchEnvironment {
  cores: number;
  cpuModel: string;
  memoryMb: number;
  nodeVersion: string;
  claudeCliVersion: string;
  temporalCliVersion: string;
  temporalSdkVersion: string;
  platform: string;
  gitCommit: string;
  /** Nice value the benchmark and everything it started ran at (see BENCH_NICE in docs/performance.md). */
  niceness: number;
  /** 1-minute load average when the run started and ended: other work on the machine skews figures. */
  loadAverage: { start: number; end: number };
  /** Per cent of the last minute some task waited for a CPU (PSI), at start and end; null without /proc/pressure. */
  cpuPressure: { start: number | null; end: number | null };
}

export interface BenchReport {
  generatedAt: string;
  /** @unit seconds */
  durationS: number;
  command: string;
  environment: BenchEnvironment;
  benchmarks: BenchmarkResult[];
}

function verdict(goal: BenchmarkResult['goal'], error?: string): string {
  if (error) return 'error';
  if (goal.met === null) return 'report';
  return goal.met ? 'pass' : '**FAIL**';
}

/** The summary: where and how it was measured, then one row per benchmark. */
function renderSummary(report: BenchReport): string[] {
  const env = report.environment;
  return [
    `Measured ${report.generatedAt.slice(0, 16).replace('T', ' ')} UTC in ${Math.round(report.durationS)} s with \`${report.command}\`: ${env.cores} cores (${env.cpuModel}), ` +
      `${Math.round(env.memoryMb / 1024)} GiB, Node ${env.nodeVersion}, Claude Code ${env.claudeCliVersion}, Temporal CLI ${env.temporalCliVersion}, ` +
      `SDK ${env.temporalSdkVersion}, commit ${env.gitCommit}. Load average ${env.loadAverage.start} at start, ${env.loadAverage.end} at end; ` +
      `CPU pressure ${env.cpuPressure.start ?? 'n/a'} % at start, ${env.cpuPressure.end ?? 'n/a'} % at end; nice ${env.niceness}.`,
    '',
    '| benchmark | result | goal | verdict | reps |',
    '| --- | --- | --- | --- | --- |',
    ...report.benchmarks.map((b) => `| ${b.title} | ${b.headline} | ${b.goal.text} | ${verdict(b.goal, b.error)} | ${b.repetitions} |`),
  ];
}

/** The readable form: the summary table, then each benchmark's method, details and notes. */
export function renderMarkdown(report: BenchReport): string {
  const lines = ['# agent-pipeline benchmarks', '', ...renderSummary(report), ''];
  for (const b of report.benchmarks) {
    lines.push(`## ${b.title}`, '', b.method, '');
    if (b.error) lines.push(`**Error:** ${b.error}`, '');
    if (b.table) {
      lines.push(`| ${b.table.columns.join(' | ')} |`, `| ${b.table.columns.map(() => '---').join(' | ')} |`);
      for (const row of b.table.rows) lines.push(`| ${row.join(' | ')} |`);
      lines.push('');
    }
    for (const note of b.notes) lines.push(`- ${note}`);
    if (b.notes.length > 0) lines.push('');
  }
  return lines.join('\n');
}

/** Writes `<dir>/<base>.json` and `<dir>/<base>.md`, each atomically. */
export async function writeReport(report: BenchReport, dir: string, base: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const json = path.join(dir, `${base}.json`);
  const markdown = path.join(dir, `${base}.md`);
  await writeFileAtomic(json, `${JSON.stringify(report, null, 2)}\n`);
  await writeFileAtomic(markdown, renderMarkdown(report));
  return [json, markdown];
}

const TABLE_START = '<!-- bench:latest:start -->';
const TABLE_END = '<!-- bench:latest:end -->';

/** Replaces the summary between the bench:latest markers in `readme`, so the page (docs/performance.md) shows the latest full run. */
export async function updateReadmeSummary(readme: string, report: BenchReport): Promise<boolean> {
  const text = await readFile(readme, 'utf8').catch(() => undefined);
  const start = text?.indexOf(TABLE_START) ?? -1;
  const end = text?.indexOf(TABLE_END) ?? -1;
  if (text === undefined || start < 0 || end < start) return false;
  const summary = ['', ...renderSummary(report), '', ''].join('\n');
  await writeFileAtomic(readme, `${text.slice(0, start + TABLE_START.length)}${summary}${text.slice(end)}`);
  return true;
}
