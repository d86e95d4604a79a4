/*
 * Caps on what an agent's report may carry into the run. A stage result travels in Temporal payloads (2 MB each)
 * and stays in the run's state, which `status` and the final result carry whole; one runaway value must not fail the
 * run. Prose a person reads (the summary, a question, an error) is cut with a warning: the full text stays in the
 * transcript. Values later stages and scripts read (`outputs`, a reviewer's `feedback`) are never cut, since a cut
 * value would silently feed them wrong data: the stage fails `OUTPUT_TOO_LARGE` naming the field instead.
 */

/** The caps, in UTF-8 bytes of the value (of its JSON text for anything but a string). */
export const OUTPUT_CAPS = {
  /** `summary`, and a question or `error` text: longer is cut, with a warning. @unit bytes */
  summaryBytes: 16 * 1024,
  /** Each entry of `outputs`. @unit bytes */
  outputBytes: 64 * 1024,
  /** All of `outputs` together. @unit bytes */
  outputsBytes: 256 * 1024,
  /** A reviewer's `feedback`, all findings together. @unit bytes */
  feedbackBytes: 64 * 1024,
  /** The agent's final answer kept in the result (`{{stages.ID.answer}}`): longer is cut, with a warning. @unit bytes */
  answerBytes: 16 * 1024,
  /** The whole final answer kept beside the result when `answer` was cut: far above any model's, an end to a runaway one. @unit bytes */
  wholeAnswerBytes: 32 * 1024 * 1024,
  /** A command stage's output kept in one attempt's transcript (`logs`); later lines are counted, not kept. @unit bytes */
  commandTranscriptBytes: 32 * 1024 * 1024,
  /** Each of the report's own top-level fields (`{{stages.ID.report.FIELD}}`), like an entry of `outputs`. @unit bytes */
  reportFieldBytes: 64 * 1024,
  /** All of the report's own fields together. @unit bytes */
  reportBytes: 128 * 1024,
} as const;

/** The most artifacts one stage result lists; the rest are counted by top folder (see {@link OmittedArtifacts}). */
export const MAX_LISTED_ARTIFACTS = 1000;
/** The most top folders an artifact overflow names; the others are added up under `(other folders)`. */
const MAX_OMITTED_FOLDERS = 20;

/** Files a stage changed beyond the first {@link MAX_LISTED_ARTIFACTS} (by path), counted rather than listed. */
export interface OmittedArtifacts {
  count: number;
  /** @unit bytes */
  bytes: number;
  /** Count by top folder (`.venv/`), `./` for files at the top of the workspace; the largest first. */
  byFolder: Record<string, number>;
}

/**
 * Artifacts beyond `limit` counted by top folder: `{ listed, omitted }`, `omitted` undefined when all are listed.
 * `artifacts` should be sorted by path, so the same files are listed whichever attempt reports them.
 */
export function capArtifacts<T extends { path: string; bytes: number }>(artifacts: readonly T[], limit = MAX_LISTED_ARTIFACTS, earlier?: OmittedArtifacts): { listed: T[]; omitted?: OmittedArtifacts } {
  if (artifacts.length <= limit && !earlier) return { listed: [...artifacts] };
  const counts = new Map<string, number>(Object.entries(earlier?.byFolder ?? {}));
  let bytes = earlier?.bytes ?? 0;
  let count = earlier?.count ?? 0;
  for (const artifact of artifacts.slice(limit)) {
    const slash = artifact.path.indexOf('/');
    const folder = slash < 0 ? './' : artifact.path.slice(0, slash + 1);
    counts.set(folder, (counts.get(folder) ?? 0) + 1);
    bytes += artifact.bytes;
    count++;
  }
  // Plain comparison, not localeCompare: workflow code runs this and must sort alike on every Node build.
  const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const byFolder = Object.fromEntries(sorted.slice(0, MAX_OMITTED_FOLDERS));
  const rest = sorted.slice(MAX_OMITTED_FOLDERS).reduce((sum, [, n]) => sum + n, 0);
  if (rest > 0) byFolder['(other folders)'] = (byFolder['(other folders)'] ?? 0) + rest;
  return { listed: artifacts.slice(0, limit), omitted: count > 0 ? { count, bytes, byFolder } : undefined };
}

/** `19000 more files: .venv/ 18990, build/ 10` */
export function describeOmittedArtifacts(omitted: OmittedArtifacts): string {
  const folders = Object.entries(omitted.byFolder).map(([folder, n]) => `${folder} ${n}`).join(', ');
  return `${omitted.count} more files (${formatSize(omitted.bytes)}): ${folders}`;
}

/** A field over its cap: the stage fails `OUTPUT_TOO_LARGE` with this. */
export interface OversizedField {
  /** `outputs.report`, `outputs`, `feedback`. */
  field: string;
  /** @unit bytes */
  bytes: number;
  /** @unit bytes */
  limit: number;
}

const encoder = new TextEncoder();

/** The size of a value as the report carries it. @unit bytes */
export function reportedBytes(value: unknown): number {
  return encoder.encode(typeof value === 'string' ? value : (JSON.stringify(value) ?? '')).byteLength;
}

/** `16 KB`, `1.5 MB`. */
export function formatSize(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(bytes / 1024)} KB`;
}

/**
 * `text` cut to at most `limitBytes` of UTF-8 (never inside a character), with a note saying how much was left out;
 * unchanged when it fits.
 */
export function capText(text: string, limitBytes: number = OUTPUT_CAPS.summaryBytes): { text: string; cut: boolean; bytes: number } {
  const bytes = encoder.encode(text);
  if (bytes.byteLength <= limitBytes) return { text, cut: false, bytes: bytes.byteLength };
  const note = ` … [cut: ${bytes.byteLength} bytes, over the ${formatSize(limitBytes)} limit; the full text is in the transcript]`;
  const keep = Math.max(0, limitBytes - encoder.encode(note).byteLength);
  // A cut inside a multi-byte character decodes to U+FFFD at the end: drop it.
  const head = new TextDecoder('utf-8').decode(bytes.subarray(0, keep)).replace(/\uFFFD+$/, '');
  return { text: head + note, cut: true, bytes: bytes.byteLength };
}

/** The first field of a report over its cap (each output, then all outputs, then feedback), or undefined. */
export function findOversizedField(report: { outputs?: Record<string, unknown>; feedback?: unknown }, extra: Record<string, unknown> = {}): OversizedField | undefined {
  const outputs = report.outputs ?? {};
  for (const [key, value] of Object.entries(outputs)) {
    const bytes = reportedBytes(value);
    if (bytes > OUTPUT_CAPS.outputBytes) return { field: `outputs.${key}`, bytes, limit: OUTPUT_CAPS.outputBytes };
  }
  const all = reportedBytes(outputs);
  if (all > OUTPUT_CAPS.outputsBytes) return { field: 'outputs', bytes: all, limit: OUTPUT_CAPS.outputsBytes };
  if (report.feedback !== undefined) {
    const bytes = reportedBytes(report.feedback);
    if (bytes > OUTPUT_CAPS.feedbackBytes) return { field: 'feedback', bytes, limit: OUTPUT_CAPS.feedbackBytes };
  }
  for (const [key, value] of Object.entries(extra)) {
    const bytes = reportedBytes(value);
    if (bytes > OUTPUT_CAPS.reportFieldBytes) return { field: key, bytes, limit: OUTPUT_CAPS.reportFieldBytes };
  }
  const extraBytes = reportedBytes(extra);
  if (extraBytes > OUTPUT_CAPS.reportBytes) return { field: 'report fields besides the contract\'s', bytes: extraBytes, limit: OUTPUT_CAPS.reportBytes };
  return undefined;
}
