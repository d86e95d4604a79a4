import Anthropic from '@anthropic-ai/sdk';
import type { AllowedPaths } from '../../src/activities/workspace/allowed-paths.js';
import type { PipelineDirs } from '../../src/activities/prompt/worker-files.js';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { DEFAULT_MODELS } from '../../src/activities/backends/models.js';
import { ExitingAgents } from '../../src/activities/backends/claude-cli/agent-exits.js';
import { createActivities } from '../../src/activities/index.js';
import { SecretRegistry } from '../../src/activities/secrets.js';
import type { StageAttemptInput } from '../../src/contracts/stage-attempt.js';
import { parsePipeline } from '../../src/pipeline/parse.js';
import type { PipelineDefinition } from '../../src/pipeline/schema.js';
import { resolveStage } from '../../src/pipeline/stage-options.js';
import type { StageResult } from '../../src/pipeline/stage-result.js';
import type { AttemptProgress } from '../../src/activities/backends/stage-backend.js';

/*
 * Runs the real `runStage` activity (real backends, real SDK or CLI) outside a worker, under
 * Temporal's MockActivityEnvironment: attempt numbers, heartbeat details and cancellation as a
 * worker would give them, without the round trip through a server.
 */

export interface ActivityWorld {
  workspacesRoot: string;
  /** Base URL of the model API (the scripted server). */
  baseURL: string;
  /** The API key; `undefined` means none is configured. */
  apiKey?: string;
  env?: NodeJS.ProcessEnv;
  /** Host folders runs may name; tests lend any folder, as `agent-pipeline dev` does, unless they say otherwise. @default 'any' */
  allowedPaths?: AllowedPaths;
  /** Folders runs without a bundle may read their files from; tests' runs carry none, so any. @default 'any' */
  pipelineDirs?: PipelineDirs;
}

/** The worker's activities for `world`, built as the worker builds them. */
export function activitiesFor(world: ActivityWorld) {
  return createActivities({
    workspacesRoot: world.workspacesRoot,
    allowedPaths: world.allowedPaths ?? 'any',
    pipelineDirs: world.pipelineDirs ?? 'any',
    secrets: new SecretRegistry(),
    cli: { env: { ...process.env, ANTHROPIC_BASE_URL: world.baseURL, ANTHROPIC_API_KEY: world.apiKey, ...world.env }, exitingAgents: new ExitingAgents() },
    api: {
      client: world.apiKey ? new Anthropic({ apiKey: world.apiKey, baseURL: world.baseURL, maxRetries: 0 }) : undefined,
      models: DEFAULT_MODELS,
    },
  });
}

/** The input the workflow would send for stage `stageId` of a pipeline written as YAML. */
export function stageInput(yaml: string, stageId: string, overrides: Partial<StageAttemptInput> & { baseDir: string; runId: string }): StageAttemptInput {
  const pipeline: PipelineDefinition = parsePipeline(yaml, 'pipeline.yaml');
  const definition = pipeline.stages.find((s) => s.id === stageId);
  if (!definition) throw new Error(`no stage ${stageId} in the test pipeline`);
  return {
    pipelineName: pipeline.name,
    stage: resolveStage(pipeline, definition),
    inputs: {},
    priorStages: {},
    pipeline: { context: pipeline.context, systemPrompt: pipeline.systemPrompt, mcpServers: pipeline.mcpServers, workspace: pipeline.workspace },
    round: 1,
    ...overrides,
  };
}

export interface AttemptRun {
  env: MockActivityEnvironment;
  heartbeats: AttemptProgress[];
  result: Promise<StageResult>;
}

/** Starts one attempt; `attempt` and `heartbeatDetails` are what Temporal would pass a retry. */
export function startAttempt(
  activities: ReturnType<typeof activitiesFor>,
  input: StageAttemptInput,
  info: { attempt?: number; heartbeatDetails?: unknown } = {},
): AttemptRun {
  // Failing attempts are what these tests are about; the worker's "Activity failed" warnings would only be noise.
  const env = new MockActivityEnvironment({ attempt: info.attempt ?? 1, heartbeatDetails: info.heartbeatDetails }, { logger: new DefaultLogger('ERROR') });
  const heartbeats: AttemptProgress[] = [];
  env.on('heartbeat', (details: AttemptProgress) => heartbeats.push(details));
  return { env, heartbeats, result: env.run(activities.runStage, input) };
}

/** The failure an attempt threw, for assertions on type, retryability and message. */
export async function failureOf(run: Promise<unknown>): Promise<Error & { type?: string; nonRetryable?: boolean; nextRetryDelay?: unknown; details?: unknown[] }> {
  try {
    await run;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the attempt to fail');
}
