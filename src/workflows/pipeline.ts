import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createActivities } from '../activities/index.js';
import { findReadyStages } from '../pipeline/graph.js';
import type { RunState } from '../pipeline/run-state.js';
import { resolveStage, type ResolvedStage } from '../pipeline/stage-options.js';
import { getStatusQuery, type PipelineRunInput } from './messages.js';
import { RunTracker } from './run-tracker.js';
import { COST_USD_ATTRIBUTE, CURRENT_STAGES_ATTRIBUTE } from './search-attributes.js';

type Activities = ReturnType<typeof createActivities>;

/**
 * Runs a pipeline: each stage is one activity, started as soon as the stages it needs have completed.
 * The first stage that fails for good cancels its running siblings and fails the run.
 */
export async function pipelineWorkflow(input: PipelineRunInput): Promise<RunState> {
  const stages = input.pipeline.stages.map((s) => resolveStage(input.pipeline, s));
  const tracker = new RunTracker(workflowInfo().workflowId, input.pipeline.name, input.inputs, stages);
  setHandler(getStatusQuery, () => tracker.state);

  const publish = (): void => {
    setCurrentDetails(tracker.describe());
    upsertSearchAttributes([
      { key: CURRENT_STAGES_ATTRIBUTE, value: tracker.runningStageIds() },
      { key: COST_USD_ATTRIBUTE, value: tracker.state.costUsd },
    ]);
  };

  const running = new Map<string, Promise<void>>();
  let failure: ApplicationFailure | undefined;
  // Stages run in their own scope so a failing stage can cancel its siblings without cancelling the run.
  const stageScope = new CancellationScope();

  const runOne = async (stage: ResolvedStage): Promise<void> => {
    tracker.markRunning(stage.id);
    publish();
    try {
      const result = await stageScope.run(() =>
        activitiesFor(stage).runStage({
          runId: tracker.state.runId,
          pipelineName: input.pipeline.name,
          baseDir: input.baseDir,
          stage,
          inputs: input.inputs,
          priorStages: tracker.templateStages(),
          pipeline: {
            context: input.pipeline.context,
            systemPrompt: input.pipeline.systemPrompt,
            mcpServers: input.pipeline.mcpServers,
            workspace: input.pipeline.workspace,
          },
          round: 1,
        }),
      );
      if (result.status === 'completed') {
        tracker.markCompleted(stage.id, result);
      } else {
        const message =
          result.status === 'needs_input'
            ? `stage ${stage.id} needs input: ${result.question ?? result.summary}`
            : `stage ${stage.id} reported failure: ${result.error ?? result.summary}`;
        tracker.markCompleted(stage.id, result);
        tracker.markFailed(stage.id, { type: result.status === 'needs_input' ? 'STAGE_NEEDS_INPUT' : 'STAGE_FAILED', message }, false);
        failure ??= ApplicationFailure.create({ type: 'STAGE_FAILED', message, nonRetryable: true });
        stageScope.cancel();
      }
    } catch (err) {
      const cancelled = isCancellation(err);
      tracker.markFailed(stage.id, describeFailure(err), cancelled);
      if (!cancelled) {
        failure ??= ApplicationFailure.create({
          type: 'STAGE_FAILED',
          message: `stage ${stage.id} failed: ${describeFailure(err).message}`,
          nonRetryable: true,
        });
      }
      stageScope.cancel();
    } finally {
      running.delete(stage.id);
      publish();
    }
  };

  publish();
  for (;;) {
    if (!failure && !CancellationScope.current().consideredCancelled) {
      for (const id of findReadyStages(stages, tracker.isStarted, tracker.isCompleted)) {
        running.set(id, runOne(stages.find((s) => s.id === id)!));
      }
    }
    if (running.size === 0) break;
    await Promise.race(running.values());
  }

  tracker.skipPending();
  if (CancellationScope.current().consideredCancelled) {
    tracker.finish('cancelled');
    publish();
    // A CancelledFailure makes Temporal record the run as cancelled rather than failed.
    throw new CancelledFailure('the run was cancelled');
  }
  if (failure) {
    tracker.finish('failed');
    publish();
    throw failure;
  }
  const result = tracker.finish('completed');
  publish();
  return result;
}

function activitiesFor(stage: ResolvedStage): Activities {
  return proxyActivities<Activities>({
    summary: `stage ${stage.id} · ${stage.backend} · ${stage.model}`,
    startToCloseTimeout: stage.timeoutMs,
    // Heartbeats are how a dead worker is noticed: without them a crashed stage would wait out the whole timeout.
    heartbeatTimeout: stage.heartbeatTimeoutMs,
    // Wait for the agent process to be really stopped before the run reports cancelled.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: stage.retries + 1,
      initialInterval: '1s',
      backoffCoefficient: 2,
      maximumInterval: '1m',
    },
  });
}

/** The innermost failure a person should read: the activity's own message, not Temporal's wrapper. */
function describeFailure(err: unknown): { type: string; message: string } {
  let current: unknown = err;
  while (current instanceof Error && current.cause instanceof Error && !(current instanceof ApplicationFailure)) {
    current = current.cause;
  }
  if (current instanceof ApplicationFailure) return { type: current.type ?? 'ApplicationFailure', message: current.message };
  if (current instanceof Error) return { type: current.name, message: current.message };
  return { type: 'Error', message: String(current) };
}
