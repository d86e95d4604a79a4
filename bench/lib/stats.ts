/** Small statistics helpers; every figure in the results is one of these over repeated measurements. */

/** The median; `NaN` for no values. */
export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/**
 * The `p`th percentile with linear interpolation between closest ranks (numpy's default), so
 * p95 of few samples lies between the two largest rather than jumping to the maximum.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

/** Rounds to `digits` decimals; keeps results readable in JSON. */
export function round(value: number, digits = 1): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Kibibytes to mebibytes, one decimal. */
export function kbToMb(kb: number): number {
  return round(kb / 1024, 1);
}

/** Milliseconds elapsed since `startNs` (a `process.hrtime.bigint()` reading). */
export function elapsedMs(startNs: bigint): number {
  return Number(process.hrtime.bigint() - startNs) / 1e6;
}

/** The first line of an error's message, cut to `max` characters: enough to say what failed in a table. */
export function firstLine(err: unknown, max = 300): string {
  const message = err instanceof Error ? err.message : String(err);
  const line = message.split('\n')[0];
  return line.length > max ? `${line.slice(0, max)}…` : line;
}
