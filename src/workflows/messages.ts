import { defineQuery } from '@temporalio/workflow';
import type { PipelineDefinition } from '../pipeline/schema.js';
import type { RunState } from '../pipeline/run-state.js';

/** Task queue used when `AGENT_PIPELINE_TASK_QUEUE` is not set; client and worker must agree. */
export const DEFAULT_TASK_QUEUE = 'agent-pipeline';

/** The workflow type name as it appears in the Web UI and in `list`. */
export const PIPELINE_WORKFLOW_TYPE = 'pipelineWorkflow';

/** What the client sends to start a run. Agent and prompt files are read by the worker from `baseDir`. */
export interface PipelineRunInput {
  pipeline: PipelineDefinition;
  /** Absolute folder of the pipeline file; agent, prompt and context paths resolve against it. */
  baseDir: string;
  /** The pipeline file as the user named it, for messages. */
  pipelineFile: string;
  inputs: Record<string, string>;
}

/** The run's full state: stages, attempts, costs, artifacts. */
export const getStatusQuery = defineQuery<RunState>('getStatus');
