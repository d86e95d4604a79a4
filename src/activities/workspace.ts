import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rename, stat, writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline as streamPipeline } from 'node:stream/promises';
import type { ArtifactRef } from '../pipeline/stage-result.js';

/** Our own bookkeeping inside a run folder: transcripts, Claude sessions. Never reported as artifacts. */
export const INTERNAL_DIR = '.agent-pipeline';
const IGNORED_DIRS = new Set([INTERNAL_DIR, '.git', 'node_modules']);

/** Where a run's files live. One folder per run, shared by all its stages and all their attempts. */
export interface RunWorkspace {
  /** The run folder: the agents' working directory and where artifacts land. */
  dir: string;
  /** Claude Code's config dir for this run, so any worker that sees the folder can resume a session. */
  claudeConfigDir: string;
  /** Per-stage bookkeeping folder (transcripts). */
  stageDir(stageId: string): string;
}

/** Creates (or reopens) the workspace of a run under `root`. Idempotent, so retries reuse it. */
export async function openRunWorkspace(root: string, runId: string): Promise<RunWorkspace> {
  const dir = path.join(root, toFolderName(runId));
  const claudeConfigDir = path.join(dir, INTERNAL_DIR, 'claude');
  await mkdir(claudeConfigDir, { recursive: true });
  return { dir, claudeConfigDir, stageDir: (stageId) => path.join(dir, INTERNAL_DIR, 'stages', stageId) };
}

/** Workflow ids may hold characters a folder name should not. */
function toFolderName(runId: string): string {
  return runId.replace(/[^A-Za-z0-9._-]/g, '_');
}

/** Size and modification time of every file, keyed by workspace-relative path. */
export type FileSnapshot = Map<string, { bytes: number; mtimeMs: number }>;

/** Records the files in `dir` so artifacts can later be found as what an attempt created or changed. */
export async function snapshotFiles(dir: string): Promise<FileSnapshot> {
  const snapshot: FileSnapshot = new Map();
  const walk = async (folder: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(folder, entry.name);
      if (entry.isDirectory()) {
        if (!IGNORED_DIRS.has(entry.name)) await walk(full);
      } else if (entry.isFile()) {
        const info = await stat(full);
        snapshot.set(path.relative(dir, full).split(path.sep).join('/'), { bytes: info.size, mtimeMs: info.mtimeMs });
      }
    }
  };
  await walk(dir);
  return snapshot;
}

/** Files that are new or changed since `before`, with size and sha256, sorted by path. */
export async function collectArtifacts(dir: string, before: FileSnapshot): Promise<ArtifactRef[]> {
  const after = await snapshotFiles(dir);
  const changed = [...after].filter(([file, now]) => {
    const then = before.get(file);
    return !then || then.bytes !== now.bytes || then.mtimeMs !== now.mtimeMs;
  });
  const artifacts = await Promise.all(
    changed.map(async ([file, info]) => ({ path: file, bytes: info.bytes, sha256: await hashFile(path.join(dir, file)) })),
  );
  return artifacts.sort((a, b) => a.path.localeCompare(b.path));
}

async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await streamPipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

/** Writes a file so readers see the old content or the new, never half of it. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(temp, data);
    await rename(temp, file);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}

/** Resolves `relative` inside `dir`, refusing paths that escape it. */
export function resolveInside(dir: string, relative: string): string | undefined {
  const full = path.resolve(dir, relative);
  const rel = path.relative(dir, full);
  return rel.startsWith('..') || path.isAbsolute(rel) ? undefined : full;
}
