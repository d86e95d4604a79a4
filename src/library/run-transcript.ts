import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { isRealDir } from '../activities/workspace/own-files.js';
import { runFolder } from '../activities/workspace/run-folder.js';
import { loadConfig } from '../config.js';
import type { ForkedFrom, RunRef, StageStatus } from '../pipeline/run-state.js';
import { InvalidRequestError } from './errors.js';
import { readRun } from './run-reader.js';
import { readLines } from './tail-file.js';
import { listTranscripts, oldStageFolder, stageFolder, type TranscriptFile } from './transcript-files.js';
import { transcriptNotFound } from './transcript-not-found.js';
import type { ClientStoreSettings } from './client-store.js';
import type { TranscriptCheckpoint } from './stored-transcripts.js';

/** Options of `run.transcript()`. */
export interface TranscriptOptions {
  stage: string;
  /** Only this attempt. @default every attempt of every round, oldest first */
  attempt?: number;
  /** Keep reading while the stage runs, moving on to retries and new rounds (as `logs --follow`). @default false */
  follow?: boolean;
  signal?: AbortSignal;
  /** The workers' workspaces folder, for a run that has not reported its workspace yet. @default `AGENT_PIPELINE_WORKSPACES`, else `.agent-pipeline/workspaces` */
  workspacesRoot?: string;
}

/**
 * What `run.transcript()` yields: each attempt's transcript file as it is reached, then its lines (stream-json, as
 * saved). `takenOverFrom` names the run whose transcript it is, for a stage a fork took over from it.
 */
export type TranscriptEntry = ({ type: 'transcript'; checkpoint?: TranscriptCheckpoint; takenOverFrom?: string } & TranscriptFile) | { type: 'line'; file: string; text: string };

/** How often a follow re-reads the run to learn whether the stage still runs. @unit milliseconds */
const RUN_POLL_MS = 2_000;
/** How much of one transcript is read: far above any agent's session, and an end to a file that never stops growing. @unit bytes */
const MAX_TRANSCRIPT_BYTES = 256 * 1024 * 1024;
const FINISHED: ReadonlySet<StageStatus> = new Set(['completed', 'failed', 'skipped', 'cancelled']);
/** How many forks back a taken-over stage's transcripts are followed (a fork of a fork of …): past any real chain. */
const MAX_FORK_HOPS = 16;

/**
 * A stage's agent transcripts from the run's bookkeeping in the workers' workspaces folder, which this host must see
 * (a worker host, or one mounting the same workspaces folder): what `agent-pipeline logs` prints. With `follow`, lines come as the agent writes them.
 * @throws InvalidRequestError `INVALID_REQUEST` for a stage the run does not have; `TRANSCRIPT_NOT_FOUND` when none is found
 */
export function readTranscript(client: Client, runId: string, options: TranscriptOptions, storeSettings: Omit<ClientStoreSettings, 'workspacesRoot'> = {}): AsyncGenerator<TranscriptEntry, void, undefined> {
  return readStageTranscript(client, { runId }, options, storeSettings, 0);
}

/**
 * {@link readTranscript}, `hops` forks away from the run asked about. The run is the latest that bore the id (the one
 * `status` shows), unless `asked` names an earlier one (a fork's source, as the fork recorded it): its files are read.
 */
async function* readStageTranscript(client: Client, asked: RunRef, options: TranscriptOptions, storeSettings: Omit<ClientStoreSettings, 'workspacesRoot'>, hops: number): AsyncGenerator<TranscriptEntry, void, undefined> {
  const { runId } = asked;
  const { state } = await readRun(client, runId);
  const run: RunRef = asked.firstExecutionRunId === undefined ? state : asked;
  const stage = state.stages.find((s) => s.id === options.stage);
  if (!stage) {
    throw new InvalidRequestError('INVALID_REQUEST', `run ${runId} has no stage "${options.stage}"; its stages: ${state.stages.map((s) => s.id).join(', ')}`);
  }
  // A stage a fork took over ran in the fork's source: its transcripts are there (a rework in the fork adds its own).
  const takenOverFrom = stage.carriedCostUsd !== undefined ? state.forkedFrom : undefined;
  const carried = takenOverFrom !== undefined && hops < MAX_FORK_HOPS ? yield* fromForkSource(client, takenOverFrom, options, storeSettings, hops) : 0;
  const root = options.workspacesRoot ?? loadConfig().workspacesRoot;
  const reported = [state.workspace, stage.result?.workspace];
  const folder = await findStageFolder(root, run, options.stage, reported);
  const status = new StageStatusReader(client, runId, options.stage, stage.status);
  const wanted = async (): Promise<TranscriptFile[]> => (await listTranscripts(folder)).filter((t) => options.attempt === undefined || t.attempt === options.attempt);
  const { signal } = options;
  const read = new Set<string>();
  while (!signal?.aborted) {
    const pending = (await wanted()).filter((t) => !read.has(t.file));
    if (pending.length === 0) {
      // A pending stage has yet to start and a waiting one may resume (an answer, a retry): only these are over.
      if (!options.follow || FINISHED.has(await status.now())) break;
      await sleep(RUN_POLL_MS / 4, undefined, { signal }).catch(() => undefined);
      continue;
    }
    for (const [i, transcript] of pending.entries()) {
      read.add(transcript.file);
      // Only the newest transcript can still grow; it is over when a newer one appears or the stage stops running.
      const follow = Boolean(options.follow) && i === pending.length - 1;
      // The status may lag the file by a poll: a transcript that exists belongs to a stage that has started.
      const isDone = async (): Promise<boolean> => (await wanted()).some((t) => !read.has(t.file)) || !['pending', 'running'].includes(await status.now());
      yield { type: 'transcript', ...transcript };
      for await (const text of readLines(transcript.file, { follow, isDone, signal, maxBytes: MAX_TRANSCRIPT_BYTES })) yield { type: 'line', file: transcript.file, text };
    }
    if (!options.follow) break;
  }
  if (read.size === 0 && carried === 0 && !signal?.aborted) {
    // Not in the workspaces folder this host sees: the run's newest checkpoint in the workers' store may hold them.
    if (yield* fromCheckpoint({ ...storeSettings, workspacesRoot: root }, run, options)) return;
    const rootFrom = options.workspacesRoot !== undefined ? 'option' : process.env.AGENT_PIPELINE_WORKSPACES ? 'variable' : 'default';
    throw transcriptNotFound({ runId, firstExecutionRunId: run.firstExecutionRunId, stageId: options.stage, attempt: options.attempt, root, rootFrom, folder, reported });
  }
}

/**
 * Yields the transcripts of a stage a fork took over, read from its source run (itself perhaps a fork: then from where
 * it ran), each marked with the run it ran in; returns how many. A source that is gone, or holds none, gives none.
 */
async function* fromForkSource(client: Client, source: ForkedFrom, options: TranscriptOptions, storeSettings: Omit<ClientStoreSettings, 'workspacesRoot'>, hops: number): AsyncGenerator<TranscriptEntry, number, undefined> {
  let count = 0;
  try {
    // It completed in the source: nothing there to follow.
    const sourceRun = { runId: source.runId, firstExecutionRunId: source.firstExecutionRunId };
    for await (const entry of readStageTranscript(client, sourceRun, { ...options, follow: false }, storeSettings, hops + 1)) {
      if (entry.type === 'line') yield entry;
      else {
        count += 1;
        yield { ...entry, takenOverFrom: entry.takenOverFrom ?? source.runId };
      }
    }
  } catch (err) {
    if (!(err instanceof InvalidRequestError) && !(err instanceof WorkflowNotFoundError)) throw err;
  }
  return count;
}

/**
 * Yields the stage's transcripts from the run's newest checkpoint in the client's store (the wanted attempt only, when
 * given), each whole; returns whether there was one. A store this client cannot read has none.
 */
async function* fromCheckpoint(settings: ClientStoreSettings, run: RunRef, options: TranscriptOptions): AsyncGenerator<TranscriptEntry, boolean, undefined> {
  // Imported here: unpacking a checkpoint loads the worker's archive and git code, which `import 'agent-pipeline'` does not.
  const { readStoredTranscripts } = await import('./stored-transcripts.js');
  const stored = await readStoredTranscripts(settings, run, options.stage).catch(() => undefined);
  if (!stored) return false;
  try {
    const wanted = stored.transcripts.filter((t) => options.attempt === undefined || t.attempt === options.attempt);
    for (const transcript of wanted) {
      if (options.signal?.aborted) break;
      yield { type: 'transcript', ...transcript, checkpoint: stored.checkpoint };
      for await (const text of readLines(transcript.file, { follow: false, signal: options.signal, maxBytes: MAX_TRANSCRIPT_BYTES })) yield { type: 'line', file: transcript.file, text };
    }
    return wanted.length > 0;
  } finally {
    await stored.dispose();
  }
}

/**
 * The stage's bookkeeping folder: in the worker's own folder under the workspaces root; for a run whose bookkeeping
 * was never moved there (it ended before the worker was upgraded), the old folder inside its tree (its own folder
 * under the root, or the workspace the worker reported), read only through real folders. Before any transcript
 * exists, the new place, where the stage's will appear.
 */
async function findStageFolder(root: string, run: RunRef, stageId: string, reported: (string | undefined)[]): Promise<string> {
  const folder = stageFolder(root, run, stageId);
  if (await isRealDir(folder)) return folder;
  for (const workspace of [runFolder(root, run), ...reported]) {
    const old = workspace === undefined ? undefined : await oldStageFolder(workspace, stageId);
    if (old) return old;
  }
  return folder;
}

/** The stage's status, read from the run at most every RUN_POLL_MS. */
class StageStatusReader {
  private lastRead = 0;

  constructor(
    private readonly client: Client,
    private readonly runId: string,
    private readonly stageId: string,
    private status: StageStatus,
  ) {}

  async now(): Promise<StageStatus> {
    if (Date.now() - this.lastRead >= RUN_POLL_MS) {
      this.lastRead = Date.now();
      this.status = (await readRun(this.client, this.runId)).state.stages.find((s) => s.id === this.stageId)?.status ?? this.status;
    }
    return this.status;
  }
}
