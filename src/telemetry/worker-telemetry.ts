import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { Client } from '@temporalio/client';
import type { ActivityInterceptorsFactory, MetricsExporterConfig, NativeConnection, WorkerOptions } from '@temporalio/worker';
import { createRequire } from 'node:module';
import type http from 'node:http';
import { RUN_STATUS_ATTRIBUTE } from '../contracts/search-attributes.js';
import { PipelineMetrics } from './metrics.js';
import { freeLoopbackPort, parseMetricsAddress, serveMetrics } from './metrics-server.js';
import { stageTelemetryInterceptor } from './stage-interceptor.js';
import { startTracing } from './tracing.js';
import type { Tracing } from './tracing-state.js';

/** The module Temporal's workflow-side OpenTelemetry interceptors live in; a traced workflow bundle includes it. */
export const OTEL_WORKFLOW_INTERCEPTORS = createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');

/** A worker's traces and metrics, each present only when its environment variable asks for it. */
export interface WorkerTelemetry {
  tracing?: Tracing;
  metrics?: PipelineMetrics;
  /** For `Runtime.install({ telemetryOptions: { metrics } })`: the SDK's Prometheus exporter on a loopback port. */
  runtimeMetrics?: MetricsExporterConfig;
  /** Starts the `/metrics` endpoint once the worker's connection exists (the waiting-runs gauge reads Visibility). */
  serve(connection: NativeConnection, namespace: string): Promise<void>;
  /** What the worker adds to its options: interceptors and the workflow span sink. */
  workerOptions(): Pick<WorkerOptions, 'sinks'> & { activityInterceptors: ActivityInterceptorsFactory[] };
  /** Flushes spans and closes the endpoint. */
  shutdown(): Promise<void>;
}

/** A worker's telemetry that does nothing: neither `OTEL_EXPORTER_OTLP_*ENDPOINT` nor `AGENT_PIPELINE_METRICS` is set. */
export const NO_TELEMETRY: WorkerTelemetry = {
  serve: async () => {},
  workerOptions: () => ({ activityInterceptors: [] }),
  shutdown: async () => {},
};

/** The Visibility query for runs that wait for a person (see search-attributes.ts). */
export const WAITING_RUNS_QUERY = `${RUN_STATUS_ATTRIBUTE.name} = "waiting" AND ExecutionStatus = "Running"`;

/**
 * Reads the telemetry settings: tracing from the standard OTLP variables (see tracing.ts), metrics from
 * `AGENT_PIPELINE_METRICS=host:port`. Call before `Runtime.install`, which takes {@link WorkerTelemetry.runtimeMetrics}.
 * @throws when `AGENT_PIPELINE_METRICS` is not host:port
 */
export async function startWorkerTelemetry(env: NodeJS.ProcessEnv): Promise<WorkerTelemetry> {
  const metricsSetting = env.AGENT_PIPELINE_METRICS?.trim();
  const address = metricsSetting ? parseMetricsAddress(metricsSetting) : undefined;
  const tracing = startTracing(env, 'agent-pipeline-worker');
  if (!tracing && !address) return NO_TELEMETRY;

  const corePort = address ? await freeLoopbackPort() : undefined;
  let metrics: PipelineMetrics | undefined;
  let server: http.Server | undefined;
  return {
    tracing,
    runtimeMetrics: corePort ? { prometheus: { bindAddress: `127.0.0.1:${corePort}` } } : undefined,
    async serve(connection, namespace) {
      if (!address || server) return;
      const client = new Client({ connection, namespace });
      metrics = new PipelineMetrics(async () => Number((await client.workflow.count(WAITING_RUNS_QUERY)).count));
      server = await serveMetrics(address, metrics, `http://127.0.0.1:${corePort}/metrics`);
    },
    workerOptions() {
      const tracer = tracing?.tracer;
      const activityInterceptors: ActivityInterceptorsFactory[] = [];
      if (tracer) {
        activityInterceptors.push((ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }));
      }
      // The metrics object appears only once serve() ran; the factory runs per attempt, so it reads it late.
      activityInterceptors.push((ctx) => stageTelemetryInterceptor(tracer, metrics)(ctx));
      return {
        activityInterceptors,
        sinks: tracing ? { exporter: makeWorkflowExporter(tracing.spanProcessor, tracing.resource) } : undefined,
      };
    },
    async shutdown() {
      await tracing?.shutdown();
      await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    },
  };
}
