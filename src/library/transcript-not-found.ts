import path from 'node:path';
import { toFolderName } from '../activities/workspace/run-folder.js';
import { withCliMessage } from '../errors.js';
import type { RunRef } from '../pipeline/run-state.js';
import { InvalidRequestError } from './errors.js';

/*
 * What `logs` (and `run.transcript()`) say when no transcript is where they looked. The workspaces folder defaults to
 * `.agent-pipeline/workspaces` in the current folder of each process, a worker's as a client's (docs/configuration.md),
 * so a client run from another folder looks in the wrong place: the message names the folder it used and why, and,
 * when the run reported its workspace, the workers' folder to use instead.
 */

/** Where a transcript was looked for. */
export interface TranscriptSearch extends RunRef {
  stageId: string;
  attempt?: number;
  /** The workspaces folder looked in. */
  root: string;
  /** Where `root` came from: the caller's option, AGENT_PIPELINE_WORKSPACES, or the default in the current folder. */
  rootFrom: 'option' | 'variable' | 'default';
  /** The stage's folder under `root` that holds no transcript. */
  folder: string;
  /** Workspaces the run reported (absolute paths on the workers' host). */
  reported: readonly (string | undefined)[];
}

/** @returns InvalidRequestError `TRANSCRIPT_NOT_FOUND`, with the fix said for the library and for the command line */
export function transcriptNotFound(search: TranscriptSearch): InvalidRequestError {
  const { runId, stageId, attempt, root, folder } = search;
  const which = attempt === undefined ? 'no transcript' : `no transcript of attempt ${attempt}`;
  const problem = `[TRANSCRIPT_NOT_FOUND] ${which} of stage ${stageId} in the workspaces folder ${root} (${describeRoot(search.rootFrom)}); looked in ${folder}.`;
  const workersRoot = workersRootOf(search, search.reported);
  if (workersRoot && workersRoot !== root) {
    const where = `The workers keep run ${runId} under ${workersRoot}`;
    return withCliMessage(
      new InvalidRequestError('TRANSCRIPT_NOT_FOUND', `${problem} ${where}: pass it as \`workspacesRoot\` (or set AGENT_PIPELINE_WORKSPACES to it), on a host that sees that folder`),
      `${problem} ${where}: run logs again with AGENT_PIPELINE_WORKSPACES=${workersRoot}, on a host that sees that folder`,
    );
  }
  const why = "The stage has not run yet, or the workers keep their workspaces in another folder (a worker's default is .agent-pipeline/workspaces in the folder it was started in)";
  return withCliMessage(
    new InvalidRequestError('TRANSCRIPT_NOT_FOUND', `${problem} ${why}: pass the workers' folder as \`workspacesRoot\` (or set AGENT_PIPELINE_WORKSPACES), on a host that sees it`),
    `${problem} ${why}: run logs in the folder the worker was started in, or set AGENT_PIPELINE_WORKSPACES to the workers' folder (on a worker host, or one mounting it)`,
  );
}

function describeRoot(from: TranscriptSearch['rootFrom']): string {
  if (from === 'option') return 'the workspacesRoot option';
  if (from === 'variable') return 'AGENT_PIPELINE_WORKSPACES';
  return 'the default, .agent-pipeline/workspaces in the current folder, as AGENT_PIPELINE_WORKSPACES is not set';
}

/**
 * The workers' workspaces folder, from a workspace the run reported: the folder holding it, when it is the run's own
 * folder (named after the run). A lent folder (`workspace.dir`) says nothing of where the workers keep their runs.
 */
export function workersRootOf(run: RunRef, reported: readonly (string | undefined)[]): string | undefined {
  const own = reported.find((workspace) => workspace !== undefined && path.basename(workspace) === toFolderName(run.runId, run.firstExecutionRunId));
  return own === undefined ? undefined : path.dirname(own);
}
