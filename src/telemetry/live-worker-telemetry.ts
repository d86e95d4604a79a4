import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import { Client } from '@temporalio/client';
import { Runtime, type ActivityInterceptorsFactory, type MetricsExporterConfig, type NativeConnection, type WorkerOptions } from '@temporalio/worker';
import type http from 'node:http';
import { RUN_STATUS_ATTRIBUTE } from '../contracts/search-attributes.js';
import { PipelineMetrics } from './metrics.js';
import { freeLoopbackPort, serveMetrics, type MetricsAddress } from './metrics-server.js';
import { stageTelemetryInterceptor } from './stage-interceptor.js';
import { startTracing } from './tracing.js';
import type { Tracing } from './tracing-state.js';

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

/** The Visibility query for runs that wait for a person (see search-attributes.ts). */
export const WAITING_RUNS_QUERY = `${RUN_STATUS_ATTRIBUTE.name} = "waiting" AND ExecutionStatus = "Running"`;

/** A worker's traces and metrics, once its environment turned one of them on (see startWorkerTelemetry). */
export async function startLiveWorkerTelemetry(env: NodeJS.ProcessEnv, address: MetricsAddress | undefined): Promise<WorkerTelemetry> {
  const tracing = startTracing(env, 'agent-pipeline-worker', {
    // Batches are exported once the worker runs, by when its runtime (and its logger) is installed.
    retryExports: { warn: (message) => Runtime.instance().logger.warn(message) },
  });
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
