import { terminalSafe } from '../terminal-text.js';

/**
 * Human output goes to stdout line by line; `--json` output is one JSON document (shapes in docs/cli.md). Lines often
 * quote what a run brought, so no terminal control in them reaches the terminal (terminal-text.ts).
 */
export function printLine(line = ''): void {
  process.stdout.write(`${terminalSafe(line)}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Progress and notes that are not the command's result go to stderr, so `--json` stdout stays parseable. */
export function printNote(line: string): void {
  process.stderr.write(`${terminalSafe(line)}\n`);
}

/** Shortens `text` to `width` columns, marking the cut with `…`. */
export function truncate(text: string, width: number): string {
  if (width <= 0 || text.length <= width) return text;
  return `${text.slice(0, Math.max(0, width - 1))}…`;
}

/** Lays out rows as left-aligned columns separated by two spaces; the last column is not padded. */
export function formatColumns(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ').trimEnd());
}

/** Formats a dollar amount the way every command shows money. */
export function formatUsd(amount: number | null | undefined): string {
  if (amount == null) return '—';
  return `$${amount < 10 ? amount.toFixed(4) : amount.toFixed(2)}`;
}

/** Formats a time as local `YYYY-MM-DD HH:MM:SS`. */
export function formatTime(ms: number | undefined): string {
  if (ms === undefined) return '—';
  const d = new Date(ms);
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
