import { activityInfo } from '@temporalio/activity';
import { findRunInputProblems } from '../pipeline/run-input.js';
import type { RunInputProblem } from '../pipeline/run-input-problems.js';

/** The worker's settings the input check applies. */
export interface RunInputCheckSettings {
  /** AGENT_PIPELINE_SANDBOX_ALLOW_LOCAL: pipelines may list loopback and link-local hosts in `sandbox.allowedDomains`. */
  allowLocalHosts: boolean;
}

/**
 * The workflow's check of its own input (run-input.ts), run as a local activity by the worker that runs the
 * workflow task. Zod and the pipeline schema then live once in the worker's main thread, built and compiled once,
 * instead of being loaded again into every workflow the worker caches (a few MB each in the reusable V8 context).
 * Pure: the same input and worker settings give the same problems (a local activity's result is recorded, so a
 * replay never asks again).
 */
export function createCheckRunInput(settings: RunInputCheckSettings): (input: unknown) => Promise<RunInputProblem[]> {
  // The run id is checked here rather than passed in, so the workflow's call (and its history) stays as it was.
  return async (input) => findRunInputProblems(input, { runId: activityInfo().workflowExecution?.workflowId, allowLocalHosts: settings.allowLocalHosts });
}
