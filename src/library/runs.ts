import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { InvalidRequestError, withCliMessage } from '../errors.js';
import { findNewRunIdProblem } from '../pipeline/run-id.js';
import { RUN_INPUT_VERSION } from '../pipeline/run-input.js';
import { summarizeBundle } from '../bundle/create-run-bundle.js';
import { BUNDLE_MEMO_KEY } from '../pipeline/run-bundle.js';
import { PIPELINE_WORKFLOW_TYPE, type PipelineRunInput } from '../contracts/messages.js';
import { PIPELINE_NAME_ATTRIBUTE } from '../contracts/search-attributes.js';
import { FORK_FORCED_MEMO_KEY, FORKED_FROM_MEMO_KEY } from '../contracts/run-fork.js';
import type { RunSigner } from '../trust/signer.js';

/**
 * What `start` does when a run with the requested id is still running, as Temporal's `workflowIdConflictPolicy`:
 * `USE_EXISTING` returns that run (`alreadyRunning: true`), `FAIL` throws `InvalidRequestError` `RUN_EXISTS`,
 * `TERMINATE_EXISTING` terminates it and starts a new run under the id. A run with that id that has ended never
 * conflicts: a new run starts.
 */
export type RunIdConflictPolicy = 'USE_EXISTING' | 'FAIL' | 'TERMINATE_EXISTING';

export interface StartRunOptions {
  taskQueue: string;
  /** Workflow id; see {@link idConflictPolicy} for an id that still runs. */
  id?: string;
  /** What to do when a run with `id` still runs. @default 'USE_EXISTING' */
  idConflictPolicy?: RunIdConflictPolicy;
  /** Signs the input for this workflow id (AGENT_PIPELINE_SIGNING_KEY); unsigned without one. */
  signer?: RunSigner;
  /**
   * Refuse `id` when an ended run has it too (`RUN_EXISTS`), not only a running one: a fork's workspace and bookkeeping
   * are found by its id, so a fork under an ended run's id would start from that run's folder. @default false
   */
  newIdOnly?: boolean;
}

/** A fresh run id: the pipeline name, the UTC start time to the second, and four random characters. */
export function newRunId(pipelineName: string, now = new Date()): string {
  return `${pipelineName}-${now.toISOString().replace(/[-:.]/g, '').slice(0, 15)}-${Math.random().toString(36).slice(2, 6)}`;
}

/** The most of one input value the run's summary shows; a long value would be stored again beside the run's input. */
export const SUMMARY_VALUE_MAX_CHARS = 80;

/** The workflow summary the Web UI shows: pipeline name and inputs (long values cut, ending in `…`). */
export function runSummary(input: PipelineRunInput): string {
  const cut = (v: string): string => (v.length > SUMMARY_VALUE_MAX_CHARS ? `${v.slice(0, SUMMARY_VALUE_MAX_CHARS - 1)}…` : v);
  const inputs = Object.entries(input.inputs).map(([k, v]) => `${k}=${cut(v)}`).join(', ');
  return `${input.pipeline.name}${inputs ? ` (${inputs})` : ''}`;
}

/** The run's memo: what its file bundle is (hash, files, bytes), and a fork's source, for `status` and the Web UI. */
export function runMemo(input: PipelineRunInput): Record<string, unknown> | undefined {
  const bundle = input.bundle ? { [BUNDLE_MEMO_KEY]: summarizeBundle(input.bundle) } : undefined;
  if (!input.fork?.stage) return bundle;
  // A fork says where it came from (a memo: a search attribute would need registering on every cluster).
  const { runId, stage, force } = input.fork;
  return { ...bundle, [FORKED_FROM_MEMO_KEY]: { runId, stage }, ...(force ? { [FORK_FORCED_MEMO_KEY]: true } : {}) };
}

/** One line on where the run's files come from, for `start` and `schedule create|update`. */
export function describeFiles(input: PipelineRunInput): string {
  if (!input.bundle) return `Files:      read by the worker from ${input.baseDir} (--files-from-worker)`;
  const { hash, files, bytes } = summarizeBundle(input.bundle);
  return `Files:      ${files} bundled into the run (${(bytes / 1024).toFixed(1)} KiB, bundle ${hash.slice(0, 12)})`;
}

/** Starts a run, or finds the running one with the same id (as `options.idConflictPolicy` says). */
export async function startRun(
  client: Client,
  input: PipelineRunInput,
  options: StartRunOptions,
): Promise<{ handle: WorkflowHandle; alreadyRunning: boolean }> {
  const workflowId = options.id ?? newRunId(input.pipeline.name);
  const idProblem = findNewRunIdProblem(workflowId);
  if (idProblem) throw new InvalidRequestError('INPUT_INVALID', `[INPUT_INVALID] ${idProblem}`);
  const versioned: PipelineRunInput = { version: RUN_INPUT_VERSION, ...input };
  try {
    const handle = await client.workflow.start(PIPELINE_WORKFLOW_TYPE, {
      workflowId,
      taskQueue: options.taskQueue,
      args: [options.signer ? options.signer.signRun(versioned, workflowId) : versioned],
      staticSummary: runSummary(input),
      staticDetails: input.pipeline.description,
      typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
      memo: runMemo(input),
      // USE_EXISTING is decided here, from Temporal's FAIL, so the caller learns the run was already running.
      workflowIdConflictPolicy: options.idConflictPolicy === 'TERMINATE_EXISTING' ? 'TERMINATE_EXISTING' : 'FAIL',
      ...(options.newIdOnly ? { workflowIdReusePolicy: 'REJECT_DUPLICATE' as const } : {}),
    });
    return { handle, alreadyRunning: false };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      if (options.idConflictPolicy === 'FAIL') {
        const problem = `[RUN_EXISTS] a run "${workflowId}" ${options.newIdOnly ? 'exists already (running or ended)' : 'is still running'}`;
        // Only a fork asks for FAIL from the command line, where the id is its --id.
        throw withCliMessage(
          new InvalidRequestError('RUN_EXISTS', `${problem}; pick another id, or start with idConflictPolicy 'USE_EXISTING' or 'TERMINATE_EXISTING'`, { cause: err }),
          `${problem}; pick another --id, or leave --id out for a new one`,
        );
      }
      return { handle: client.workflow.getHandle(workflowId), alreadyRunning: true };
    }
    throw err;
  }
}
