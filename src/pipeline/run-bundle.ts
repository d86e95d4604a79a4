/**
 * The files a run carries with it (DESIGN.md: "At `start` the client bundles the pipeline file and every file it
 * references into the run"). It travels once, in the workflow's start input, so it is in the run's first history
 * event: every worker, every retry and every replay sees the same bytes, whatever happened to the client's folder.
 * Content-addressed: each distinct content is stored once however many paths name it.
 */
export interface RunBundle {
  /** sha256 (hex) of the manifest: the sorted `path → content hash` pairs and `pipelineDir`. */
  hash: string;
  /**
   * Where the pipeline file's folder sits inside the bundle, as a `/`-separated path relative to the bundle's root
   * (the deepest folder holding every bundled file); `''` when it is the root itself.
   */
  pipelineDir: string;
  /** Bundle-relative path (`/`-separated) → sha256 (hex) of its content. */
  files: Record<string, string>;
  /** sha256 (hex) → the content: UTF-8 text as is, anything else base64. */
  blobs: Record<string, { encoding: 'utf8' | 'base64'; data: string }>;
}

/** What the run's memo and `status` say about its bundle: small, no contents. */
export interface RunBundleSummary {
  hash: string;
  /** Number of bundled paths. */
  files: number;
  /** Sum of the distinct contents. @unit bytes */
  bytes: number;
}

/** The memo key under which a run (or a schedule's runs) record their {@link RunBundleSummary}. */
export const BUNDLE_MEMO_KEY = 'agentPipelineBundle';
