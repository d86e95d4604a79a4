import { Context, type Info } from '@temporalio/activity';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { hashManifest } from '../../bundle/manifest-hash.js';
import { decodeFirstPayload } from '../../codec/data-converter.js';
import type { RunBundle } from '../../pipeline/run-bundle.js';
import { leavesFolder } from '../../pipeline/relative-paths.js';
import { stageFailure } from '../failures.js';

/**
 * Worker side of "runs that carry their own files": the run's bundle lives in its first history event (the start
 * input), so a stage attempt reads it from there once per host and writes it out under the workspaces root, named
 * by its hash. Every stage then reads agent, step, context and system prompt files from that folder exactly as it
 * would from the client's, and every attempt and replay of the run sees the same bytes.
 */

/** Folder under the workspaces root that holds unpacked bundles, one per hash. */
export const BUNDLES_FOLDER = '.bundles';
/** Written last into an unpacked bundle: its presence means the folder is complete. */
const COMPLETE_MARKER = '.complete';

/**
 * The folder that stands for the pipeline file's folder of a bundled run: the bundle unpacked under
 * `<workspacesRoot>/.bundles/<hash>/`, fetched from the run's history the first time this host needs it.
 * @throws BUNDLE_INVALID when the history holds no bundle with that hash, or its contents do not match their hashes
 */
export async function openRunBundle(workspacesRoot: string, hash: string, info: Info, stageId: string): Promise<string> {
  const folder = path.join(workspacesRoot, BUNDLES_FOLDER, hash);
  if (!existsSync(path.join(folder, COMPLETE_MARKER))) {
    const bundle = await readBundleFromHistory(info, stageId);
    await unpackRunBundle(bundle, folder, hash, stageId);
  }
  // pipelineDir is known only from the bundle; it is recorded next to the files so a cached folder needs no fetch.
  const { pipelineDir } = JSON.parse(await readFile(path.join(folder, COMPLETE_MARKER), 'utf8')) as { pipelineDir: string };
  return bundleFolderOf(folder, pipelineDir, hash, stageId);
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
    await writeFile(path.join(temp, COMPLETE_MARKER), JSON.stringify({ pipelineDir: bundle.pipelineDir }));
    await mkdir(path.dirname(folder), { recursive: true });
    await rename(temp, folder).catch(async (err: NodeJS.ErrnoException) => {
      // Another attempt (or host) unpacked the same content first: theirs is as good as ours.
      if (!existsSync(path.join(folder, COMPLETE_MARKER))) throw err;
    });
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}

/**
 * The bundle from the run's start input: one page of one event, whatever the length of the history. The input is
 * decoded with the worker's own data converter, so an encrypted input is decrypted with the worker's keys.
 */
async function readBundleFromHistory(info: Info, stageId: string): Promise<RunBundle> {
  const execution = info.workflowExecution;
  if (!execution) throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: 'the attempt belongs to no workflow run, so it has no file bundle to read' });
  const { client } = Context.current();
  const response = await client.workflowService.getWorkflowExecutionHistory({
    namespace: info.workflowNamespace,
    execution: { workflowId: execution.workflowId, runId: execution.runId },
    maximumPageSize: 1,
  });
  const started = response.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  const input = await decodeFirstPayload<{ bundle?: RunBundle }>(client.options.loadedDataConverter, started?.input);
  if (!input?.bundle) {
    throw stageFailure({ type: 'BUNDLE_INVALID', stageId, message: `the run's start input in the history of ${execution.workflowId} holds no file bundle` });
  }
  return input.bundle;
}
