import type { ClientInterceptors } from '@temporalio/client';
import { installedTracing, tracesUrlFromEnv } from './tracing-state.js';

/** What a client adds when tracing is on: the `StartWorkflow:` (and update, signal, query) spans, and a flush. */
export interface ClientTelemetry {
  interceptors?: ClientInterceptors;
  /** Sends buffered spans; the CLI calls it before exiting. */
  shutdown(): Promise<void>;
}

/**
 * Tracing for a client (the `agent-pipeline` command or a library user), from the same OTLP variables as the worker.
 * Its `StartWorkflow:` span travels in the workflow's headers, so the worker's spans join the same trace.
 */
export async function clientTelemetry(env: NodeJS.ProcessEnv = process.env): Promise<ClientTelemetry> {
  // The OpenTelemetry SDK is loaded only when tracing is on: most commands never need it.
  if (!installedTracing() && !tracesUrlFromEnv(env)) return { shutdown: async () => {} };
  const [{ startTracing }, { OpenTelemetryWorkflowClientInterceptor }] = await Promise.all([import('./tracing.js'), import('@temporalio/interceptors-opentelemetry')]);
  const tracing = startTracing(env, 'agent-pipeline-client');
  if (!tracing) return { shutdown: async () => {} };
  return {
    interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor({ tracer: tracing.tracer })] },
    shutdown: () => tracing.shutdown(),
  };
}
