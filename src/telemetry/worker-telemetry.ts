import { createRequire } from 'node:module';
import { parseMetricsAddress } from './metrics-server.js';
import { installedTracing, tracesUrlFromEnv } from './tracing-state.js';
import type { WorkerTelemetry } from './live-worker-telemetry.js';

export type { WorkerTelemetry };

/** The module Temporal's workflow-side OpenTelemetry interceptors live in; a traced workflow bundle includes it. */
export const OTEL_WORKFLOW_INTERCEPTORS = createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** A worker's telemetry that does nothing: neither `OTEL_EXPORTER_OTLP_*ENDPOINT` nor `AGENT_PIPELINE_METRICS` is set. */
export const NO_TELEMETRY: WorkerTelemetry = {
  serve: async () => {},
  workerOptions: () => ({ activityInterceptors: [] }),
  shutdown: async () => {},
};

/**
 * Reads the telemetry settings: tracing from the standard OTLP variables (see tracing.ts), metrics from
 * `AGENT_PIPELINE_METRICS=host:port`. Call before `Runtime.install`, which takes {@link WorkerTelemetry.runtimeMetrics}.
 * The OpenTelemetry SDK, Temporal's interceptors for it and the metrics registry are loaded only when one of them is
 * on: a worker without them starts in less CPU (live-worker-telemetry.ts).
 * @throws when `AGENT_PIPELINE_METRICS` is not host:port
 */
export async function startWorkerTelemetry(env: NodeJS.ProcessEnv): Promise<WorkerTelemetry> {
  const metricsSetting = env.AGENT_PIPELINE_METRICS?.trim();
  const address = metricsSetting ? parseMetricsAddress(metricsSetting) : undefined;
  if (!address && !installedTracing() && !tracesUrlFromEnv(env)) return NO_TELEMETRY;
  const { startLiveWorkerTelemetry } = await import('./live-worker-telemetry.js');
  return startLiveWorkerTelemetry(env, address);
}
