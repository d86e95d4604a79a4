import { SpanStatusCode, type Span, type Tracer } from '@opentelemetry/api';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { isCommandStage } from '../pipeline/command-stage.js';
import type { ResolvedStage } from '../pipeline/stage-options.js';
import type { StageResult, TokenUsage } from '../pipeline/stage-result.js';
import type { PipelineMetrics, StageOutcome } from './metrics.js';

/** What a stage attempt spent; results, failures and heartbeats carry it as running totals over attempts. */
interface Spent {
  costUsd?: number | null;
  usage?: Partial<TokenUsage>;
}

/** What the span and the metrics read of a `runStage` input (the activity's `StageAttemptInput`, a layer above). */
interface StageAttemptFacts {
  runId: string;
  pipelineName: string;
  round: number;
  stage: Pick<ResolvedStage, 'id' | 'backend' | 'model' | 'run'>;
}

/**
 * Wraps each `runStage` attempt in a `StageAttempt:<stage>` span (a child of the SDK's `RunActivity:runStage`) and
 * records the stage metrics. Either part may be absent: the span needs tracing on, the metrics `AGENT_PIPELINE_METRICS`.
 * Attributes follow the `agent_pipeline.*` namespace: run id, stage, its kind (`agent` or `command`), attempt, backend,
 * model, tokens, cost, outcome.
 */
export function stageTelemetryInterceptor(tracer: Tracer | undefined, metrics: PipelineMetrics | undefined): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const arg = input.args[0] as Partial<StageAttemptFacts> | undefined;
        if (ctx.info.activityType !== 'runStage' || !arg?.stage) return next(input);
        const { stage, pipelineName = '' } = arg;
        // Bounded: the names come from the run's input, and each distinct set is a series the worker keeps for ever.
        const bounded = metrics?.boundLabels({ pipeline: pipelineName, stage: stage.id, backend: stage.backend, model: stage.model }) ?? { pipeline: '', stage: '', backend: '', model: '' };
        const labels = { pipeline: bounded.pipeline, stage: bounded.stage, backend: bounded.backend };
        // Totals carried from earlier attempts; this attempt's own share is what it adds to them.
        const before = ctx.info.heartbeatDetails as Spent | undefined;
        const started = performance.now();
        metrics?.agentsRunning.inc({ backend: bounded.backend });
        const attempt = async (span?: Span): Promise<unknown> => {
          span?.setAttributes({
            'agent_pipeline.run_id': arg.runId ?? ctx.info.workflowExecution?.workflowId ?? '',
            'agent_pipeline.pipeline': pipelineName,
            'agent_pipeline.stage': stage.id,
            'agent_pipeline.stage_kind': isCommandStage(stage) ? 'command' : 'agent',
            'agent_pipeline.attempt': ctx.info.attempt,
            'agent_pipeline.round': arg.round ?? 1,
            'agent_pipeline.backend': stage.backend,
            'agent_pipeline.model': stage.model,
          });
          let outcome: StageOutcome = 'failed';
          let spent: Spent | undefined;
          try {
            const result = (await next(input)) as StageResult;
            outcome = result.status;
            spent = result;
            if (result.status === 'failed') span?.setStatus({ code: SpanStatusCode.ERROR, message: result.error ?? result.summary });
            return result;
          } catch (err) {
            const failure = err instanceof ApplicationFailure ? err : undefined;
            outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
            const type = outcome === 'cancelled' ? 'CANCELLED' : (failure?.type ?? (err as Error).name ?? 'Error');
            spent = failure?.details?.[0] as Spent | undefined;
            metrics?.stageFailures.inc({ ...labels, type });
            span?.setAttribute('agent_pipeline.failure_type', type);
            span?.recordException(err as Error);
            span?.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
            throw err;
          } finally {
            const own = ownShare(spent, before);
            span?.setAttributes({
              'agent_pipeline.outcome': outcome,
              'agent_pipeline.tokens.input': own.input,
              'agent_pipeline.tokens.output': own.output,
              'agent_pipeline.tokens.cache': own.cache,
              'agent_pipeline.cost_usd': own.costUsd,
            });
            if (metrics) {
              metrics.agentsRunning.dec({ backend: bounded.backend });
              metrics.stageDuration.observe({ ...labels, outcome }, (performance.now() - started) / 1000);
              const byModel = { ...labels, model: bounded.model };
              metrics.stageCost.inc(byModel, own.costUsd);
              metrics.tokens.inc({ ...byModel, direction: 'input' }, own.input);
              metrics.tokens.inc({ ...byModel, direction: 'output' }, own.output);
              metrics.tokens.inc({ ...byModel, direction: 'cache' }, own.cache);
            }
          }
        };
        if (!tracer) return attempt();
        return tracer.startActiveSpan(`StageAttempt:${stage.id}`, async (span) => {
          try {
            return await attempt(span);
          } finally {
            span.end();
          }
        });
      },
    },
  });
}

/** This attempt's own tokens and cost: its running totals less those of the attempts before it (never negative). */
export function ownShare(total: Spent | undefined, before: Spent | undefined): { input: number; output: number; cache: number; costUsd: number } {
  const diff = (a: number | null | undefined, b: number | null | undefined): number => Math.max(0, (a ?? 0) - (b ?? 0));
  const cache = (s: Spent | undefined): number => (s?.usage?.cacheReadTokens ?? 0) + (s?.usage?.cacheWriteTokens ?? 0);
  return {
    input: diff(total?.usage?.inputTokens, before?.usage?.inputTokens),
    output: diff(total?.usage?.outputTokens, before?.usage?.outputTokens),
    cache: Math.max(0, cache(total) - cache(before)),
    costUsd: diff(total?.costUsd, before?.costUsd),
  };
}
