import type { Tracer } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

/*
 * What a process knows about tracing without loading the OpenTelemetry SDK (tracing.ts): whether the environment asks
 * for it and whether it already runs here. A client (every CLI command) loads the SDK, about a third of its modules,
 * only when one of them says yes.
 */

/** A running trace pipeline: spans go through `spanProcessor` to the OTLP/HTTP endpoint. */
export interface Tracing {
  tracer: Tracer;
  spanProcessor: SpanProcessor;
  resource: Resource;
  /** Where spans are sent. */
  url: string;
  /** Sends what is still buffered and stops; call before the process exits. */
  shutdown(): Promise<void>;
}

/**
 * The OTLP/HTTP traces URL the standard variables name: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else
 * `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/traces` (as the OpenTelemetry specification says); undefined when neither is set.
 */
export function tracesUrlFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!base) return undefined;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

let installed: Tracing | undefined;

/** The trace pipeline this process runs, if any (one per process: a worker's, which a client beside it shares). */
export function installedTracing(): Tracing | undefined {
  return installed;
}

/** Records the process's trace pipeline (tracing.ts, when it starts or shuts one down). */
export function setInstalledTracing(tracing: Tracing | undefined): void {
  installed = tracing;
}
