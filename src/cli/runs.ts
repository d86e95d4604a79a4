import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunState } from '../pipeline/run-state.js';
import { getStatusQuery, PIPELINE_WORKFLOW_TYPE, type PipelineRunInput } from '../workflows/messages.js';
import { PIPELINE_NAME_ATTRIBUTE } from '../workflows/search-attributes.js';
import { ProgressPrinter } from './progress.js';

export interface StartRunOptions {
  taskQueue: string;
  /** Workflow id; the same id twice reports the existing run instead of starting another. */
  id?: string;
}

/** Starts a run, or finds the running one with the same id. */
export async function startRun(
  client: Client,
  input: PipelineRunInput,
  options: StartRunOptions,
): Promise<{ handle: WorkflowHandle; alreadyRunning: boolean }> {
  const workflowId = options.id ?? `${input.pipeline.name}-${new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15)}-${Math.random().toString(36).slice(2, 6)}`;
  const inputSummary = Object.entries(input.inputs).map(([k, v]) => `${k}=${v}`).join(', ');
  try {
    const handle = await client.workflow.start(PIPELINE_WORKFLOW_TYPE, {
      workflowId,
      taskQueue: options.taskQueue,
      args: [input],
      staticSummary: `${input.pipeline.name}${inputSummary ? ` (${inputSummary})` : ''}`,
      staticDetails: input.pipeline.description,
      typedSearchAttributes: [{ key: PIPELINE_NAME_ATTRIBUTE, value: input.pipeline.name }],
    });
    return { handle, alreadyRunning: false };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) {
      return { handle: client.workflow.getHandle(workflowId), alreadyRunning: true };
    }
    throw err;
  }
}

/** Queries the run's state; works for running and finished runs alike. */
export async function queryRun(handle: WorkflowHandle): Promise<RunState> {
  return handle.query(getStatusQuery);
}

/**
 * Follows a run until it ends, printing stage transitions, and returns its final state.
 * Polls the status query: cheap for the server, and it works for runs started elsewhere.
 */
export async function followRun(handle: WorkflowHandle, write: (line: string) => void, intervalMs = 1_000): Promise<RunState> {
  const printer = new ProgressPrinter(write);
  const ended = handle.result().then(
    () => true,
    (err: unknown) => {
      if (err instanceof WorkflowFailedError) return true;
      throw err;
    },
  );
  let done = false;
  void ended.then(() => (done = true), () => (done = true));
  for (;;) {
    const finished = done;
    const state = await queryRun(handle);
    printer.update(state);
    if (finished || state.status !== 'running') {
      await ended;
      const final = await queryRun(handle);
      printer.update(final);
      return final;
    }
    await Promise.race([sleep(intervalMs), ended]);
  }
}
