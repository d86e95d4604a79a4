import { Context, type Info } from '@temporalio/activity';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { hashManifest } from '../../bundle/manifest-hash.js';
import type { RunBundle } from '../../pipeline/run-bundle.js';
import { leavesFolder } from '../../pipeline/relative-paths.js';
import { stageFailure } from '../failures.js';
import { readRunStartInput } from '../run-start-input.js';
import { readOwnFile, readRecord } from '../workspace/own-files.js';
import { openWorkerSubfolder } from '../workspace/worker-folder.js';

/**
 * Worker side of "runs that carry their own files": the run's bundle lives in its first history event (the start
 * input), so a stage attempt reads it from there once per host and writes it out in the worker's own folder
 * (`<workspacesRoot>/.agent-pipeline/bundles/<hash>/`), which is no run's workspace. Every stage then reads agent,
 * step, context and system prompt files from that folder exactly as it would from the client's, and every attempt and
 * replay of the run sees the same bytes: each opening checks the cached files against the bundle's hashes first.
 */

/** Written last into an unpacked bundle: its presence means the folder is complete; it holds the manifest. */
const COMPLETE_MARKER = '.complete';
/** The largest cached file checked against its hash; anything larger was never part of a start input. @unit bytes */
const MAX_CACHED_FILE_BYTES = 64 * 1024 * 1024;

/** What the marker of an unpacked bundle records: the bundle's manifest, whose hash names the folder. */
interface UnpackedManifest {
  pipelineDir: string;
  /** Path in the bundle → sha256 of its content. */
  files: Record<string, string>;
}

/**
 * The folder that stands for the pipeline file's folder of a bundled run: the bundle unpacked in the worker's own
 * folder, fetched from the run's history the first time this host needs it, and again whenever the cached copy does
 * not match the bundle's hashes (a file changed, added or removed on disk since): what a stage reads is always what
 * the run was started with.
 * @throws BUNDLE_INVALID when the history holds no bundle with that hash, or its contents do not match their hashes
 */
export async function openRunBundle(workspacesRoot: string, hash: string, info: Info, stageId: string): Promise<string> {
  if (!/^[0-9a-f]{64}$/.test(hash)) throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: `the run's bundle hash ${JSON.stringify(hash.slice(0, 80))} is not a sha256 in hex` });
  const folder = path.join(await openWorkerSubfolder(workspacesRoot, 'bundles'), hash);
  const cached = await verifyUnpackedBundle(folder, hash);
  if (cached) return bundleFolderOf(folder, cached.pipelineDir, hash, stageId);
  if (existsSync(folder)) {
    Context.current().log.warn(`the cached copy of the run's file bundle ${hash.slice(0, 12)} in ${folder} does not match the bundle's hashes; it is unpacked again from the run's history`);
  }
  const bundle = await readBundleFromHistory(info, stageId);
  await unpackRunBundle(bundle, folder, hash, stageId);
  return bundleFolderOf(folder, bundle.pipelineDir, hash, stageId);
}

/**
 * The manifest of the bundle unpacked in `folder` when every file there is a regular file whose content matches its
 * hash in the manifest, no file is missing or extra, and the manifest hashes to `hash`; otherwise `undefined`.
 */
export async function verifyUnpackedBundle(folder: string, hash: string): Promise<UnpackedManifest | undefined> {
  const marker = await readRecord<Partial<UnpackedManifest>>(path.join(folder, COMPLETE_MARKER));
  const files = marker?.files;
  if (typeof marker?.pipelineDir !== 'string' || !files || typeof files !== 'object') return undefined;
  if (!Object.values(files).every((sha) => typeof sha === 'string') || hashManifest(marker.pipelineDir, files) !== hash) return undefined;
  const found = await listRegularFiles(path.join(folder, 'files'));
  if (!found || found.length !== Object.keys(files).length) return undefined;
  for (const relative of found) {
    const data = Object.hasOwn(files, relative) ? await readOwnFile(path.join(folder, 'files', ...relative.split('/')), MAX_CACHED_FILE_BYTES) : undefined;
    if (!data || createHash('sha256').update(data).digest('hex') !== files[relative]) return undefined;
  }
  return { pipelineDir: marker.pipelineDir, files };
}

/** Every file under `dir` by its `/`-separated relative path; `undefined` when anything there is neither a folder nor a regular file. */
async function listRegularFiles(dir: string, prefix = ''): Promise<string[] | undefined> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
  if (!entries) return undefined;
  const found: string[] = [];
  for (const entry of entries) {
    const relative = `${prefix}${entry.name}`;
    if (entry.isFile()) found.push(relative);
    else if (!entry.isDirectory()) return undefined;
    else {
      const inside = await listRegularFiles(path.join(dir, entry.name), `${relative}/`);
      if (!inside) return undefined;
      found.push(...inside);
    }
  }
  return found;
}

/**
 * The pipeline's folder inside an unpacked bundle. A `pipelineDir` that is absolute or climbs out with `..` would
 * make the worker read its own files (`/etc`) as the pipeline's: the bundle is refused.
 * @throws BUNDLE_INVALID naming the bad `pipelineDir`
 */
function bundleFolderOf(folder: string, pipelineDir: string, hash: string, stageId: string): string {
  const files = path.join(folder, 'files');
  const dir = path.resolve(files, ...pipelineDir.split('/'));
  if (typeof pipelineDir !== 'string' || path.isAbsolute(pipelineDir) || leavesFolder(pipelineDir) || (dir !== files && !dir.startsWith(files + path.sep))) {
    throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: `the run's file bundle ${hash.slice(0, 12)} names a pipeline folder outside itself: ${JSON.stringify(pipelineDir)}` });
  }
  return dir;
}

/**
 * Writes `bundle` into `folder` (a temp folder renamed into place, so a crash or a second host writing the same bundle
 * never leaves a half-written one), after checking every content against its hash and the manifest against `hash`.
 */
export async function unpackRunBundle(bundle: RunBundle, folder: string, hash: string, stageId: string): Promise<void> {
  const invalid = (message: string): never => {
    throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: `the run's file bundle ${hash.slice(0, 12)} ${message}` });
  };
  if (bundle.hash !== hash || hashManifest(bundle.pipelineDir, bundle.files) !== hash) invalid(`does not match its manifest (got ${bundle.hash.slice(0, 12)})`);
  bundleFolderOf(folder, bundle.pipelineDir, hash, stageId);
  const temp = `${folder}.${randomUUID()}.tmp`;
  try {
    for (const [relative, sha] of Object.entries(bundle.files)) {
      const blob = bundle.blobs[sha] ?? invalid(`has no content for ${relative}`);
      const data = Buffer.from(blob.data, blob.encoding === 'base64' ? 'base64' : 'utf8');
      if (createHash('sha256').update(data).digest('hex') !== sha) invalid(`has content for ${relative} that does not match its hash`);
      const file = path.resolve(temp, 'files', ...relative.split('/'));
      if (!file.startsWith(path.join(temp, 'files') + path.sep)) invalid(`names a path outside itself: ${relative}`);
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, data);
    }
    const manifest: UnpackedManifest = { pipelineDir: bundle.pipelineDir, files: bundle.files };
    await writeFile(path.join(temp, COMPLETE_MARKER), JSON.stringify(manifest));
    await mkdir(path.dirname(folder), { recursive: true });
    await placeUnpacked(temp, folder, hash);
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

/** Renames the unpacked `temp` to `folder`, putting aside a copy there that does not match its hashes. */
async function placeUnpacked(temp: string, folder: string, hash: string): Promise<void> {
  const placed = await rename(temp, folder).then(() => true, () => false);
  // Another attempt (or host) unpacked the same content first: theirs is as good as ours.
  if (placed || (await verifyUnpackedBundle(folder, hash))) return;
  const stale = `${folder}.${randomUUID()}.stale`;
  await rename(folder, stale).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
  try {
    await rename(temp, folder).catch(async (err: unknown) => {
      if (!(await verifyUnpackedBundle(folder, hash))) throw err;
    });
  } finally {
    await rm(stale, { recursive: true, force: true });
  }
}

/**
 * The bundle from the run's start input: one page of one event, whatever the length of the history. The input is
 * decoded with the worker's own data converter, so an encrypted input is decrypted with the worker's keys.
 */
async function readBundleFromHistory(info: Info, stageId: string): Promise<RunBundle> {
  const execution = info.workflowExecution;
  if (!execution) throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: 'the attempt belongs to no workflow run, so it has no file bundle to read' });
  const input = await readRunStartInput(Context.current().client, info.workflowNamespace, { workflowId: execution.workflowId, runId: execution.runId });
  if (!input?.bundle) {
    throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: `the run's start input in the history of ${execution.workflowId} holds no file bundle` });
  }
  return input.bundle;
}
