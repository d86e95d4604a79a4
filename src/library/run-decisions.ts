import type { Client, WorkflowHandle } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { RunState } from '../pipeline/run-state.js';
import type { RunSigner } from '../trust/signer.js';
import { withCliMessage } from '../errors.js';
import { InvalidRequestError, NoWorkerError } from './errors.js';
import { toLibraryError, typedErrors } from './temporal-errors.js';
import { readRun } from './run-reader.js';
import { readWorkerPresence } from './worker-presence.js';

/*
 * How a RunHandle's decisions (answer, approve, deny, reject, retry, skip) reach the run: as workflow updates, only to
 * an open run that a worker polls for, sent again to the execution that carries the run on after a continue-as-new.
 */

/** How long a decision may wait for a worker to take it. @unit milliseconds */
const UPDATE_TIMEOUT_MS = 20_000;
/** How long a decision waits when the task queue's last poll is over half a minute old. @unit milliseconds */
const QUIET_WORKER_UPDATE_TIMEOUT_MS = 5_000;
/** Times a decision is sent again because the run continued as new while it was on its way. */
const MAX_HAND_OVER_RETRIES = 3;

/** The run a decision goes to, and how the client reaches it. */
export interface DecisionTarget {
  client: Client;
  /** The run (workflow) id. */
  id: string;
  /** The server's address, for error messages. */
  address?: string;
  /** Signs each decision for this run; unsigned without one. */
  signer?: RunSigner;
}

/** A decision's arguments, signed for the run when the client has a signing key. */
function signedDecision<T extends object>(target: DecisionTarget, decision: string, args: T): T {
  return target.signer ? target.signer.signDecision(target.id, decision, args) : args;
}

/**
 * Sends decision `update` with the arguments `args` makes (read again each time it is sent), signed for the run when
 * the client signs (see {@link sendDecision}).
 */
export function sendSignedUpdate<A extends object>(target: DecisionTarget, update: UpdateDefinition<RunState, [A]>, args: () => A | Promise<A>): Promise<RunState> {
  return sendDecision(target, async (handle) => handle.executeUpdate(update, { args: [signedDecision(target, update.name, await args())] }));
}

/**
 * The request a decision is for: the one given, else, when the client signs, the digest of the mid-turn request the
 * targeted stage's agent waits on now (a signed decision on one must name it, so its signature covers which).
 */
export async function requestOf(target: DecisionTarget, stage: string | undefined, given: string | undefined): Promise<{ request?: string }> {
  if (given !== undefined || !target.signer) return given === undefined ? {} : { request: given };
  const { state } = await readRun(target.client, target.id);
  const asking = state.stages.filter((s) => (stage === undefined || s.id === stage) && (s.waitingFor?.kind === 'tool_request' || s.waitingFor?.kind === 'question'));
  const digest = asking.length === 1 ? asking[0].waitingFor?.promptDigest : undefined;
  return digest === undefined ? {} : { request: digest };
}

/**
 * Sends a decision as a workflow update. Checks first that the run is open and a worker polls its task queue: an
 * update nobody accepts is not kept. A worker that has not polled for half a minute gets a short deadline, so a
 * stopped one is told within seconds, never after a minute.
 */
function sendDecision(target: DecisionTarget, send: (handle: WorkflowHandle) => Promise<RunState>): Promise<RunState> {
  const { client, id, address } = target;
  const workflow = () => client.workflow.getHandle(id);
  return typedErrors(async () => {
    for (let handOvers = 0; ; handOvers++) {
      // Without a run id the handle targets the run's latest execution, so a run that continued as new gets it.
      const handle = workflow();
      const description = await handle.describe();
      if (description.status.name !== 'RUNNING') {
        throw new InvalidRequestError('RUN_CLOSED', `[RUN_CLOSED] run ${id} has ended (${description.status.name.toLowerCase()}); nothing waits for a decision`);
      }
      const presence = await readWorkerPresence(client, description.taskQueue);
      if (presence.kind === 'none') throw noWorker(description.taskQueue, presence.sinceMs);
      const timeoutMs = presence.kind === 'live' ? UPDATE_TIMEOUT_MS : QUIET_WORKER_UPDATE_TIMEOUT_MS;
      try {
        return await client.connection.withDeadline(Date.now() + timeoutMs, () => send(handle));
      } catch (err) {
        // The run continued as new while the decision was on its way: the execution it reached closed (or, handing
        // over, had nothing waiting). The decision is sent again to the execution that carries the run on.
        if (handOvers < MAX_HAND_OVER_RETRIES && (await continuedSince(workflow(), description.runId))) continue;
        // The run may have closed between the check and the update (which then finds no open execution): say so.
        const now = await handle.describe().catch(() => undefined);
        if (now && now.status.name !== 'RUNNING') {
          throw new InvalidRequestError('RUN_CLOSED', `[RUN_CLOSED] run ${id} ended (${now.status.name.toLowerCase()}) before the decision reached it`, { cause: err });
        }
        if (presence.kind === 'quiet' && toLibraryError(err) instanceof NoWorkerError) throw noWorker(description.taskQueue, presence.sinceMs, err);
        throw err;
      }
    }
  }, address);
}

/** True when the run's latest execution is no longer `runId` (it continued as new since). */
async function continuedSince(workflow: WorkflowHandle, runId: string): Promise<boolean> {
  const latest = await workflow.describe().catch(() => undefined);
  return latest !== undefined && latest.runId !== runId;
}

/** The one stage waiting after a failure. @throws InvalidRequestError `REQUEST_REJECTED` when none or several wait. */
export async function failedStageOf(target: DecisionTarget): Promise<string> {
  const { state } = await readRun(target.client, target.id);
  const waiting = state.stages.filter((s) => s.waitingFor?.kind === 'failure').map((s) => s.id);
  if (waiting.length === 1) return waiting[0];
  if (waiting.length === 0) throw new InvalidRequestError('REQUEST_REJECTED', `[REQUEST_REJECTED] no stage of run ${target.id} waits after a failure`);
  const problem = `[REQUEST_REJECTED] stages ${waiting.join(', ')} of run ${target.id} wait after a failure`;
  throw withCliMessage(new InvalidRequestError('REQUEST_REJECTED', `${problem}; name one with { stage }`), `${problem}; name one with --stage ${waiting[0]}`);
}

function noWorker(taskQueue: string, sinceMs: number | undefined, cause?: unknown): NoWorkerError {
  const last = sinceMs === undefined ? 'no worker polls' : `no worker has polled for ${Math.round(sinceMs / 1000)} s on`;
  const problem = `[NO_WORKER] ${last} task queue "${taskQueue}", so nobody can take the decision`;
  return withCliMessage(
    new NoWorkerError(`${problem}; start a worker (createPipelineWorker, or \`agent-pipeline worker\`) and try again`, { cause }),
    `${problem}; start a worker (\`agent-pipeline worker\`) and try again`,
  );
}
