import { context, propagation, trace, type Context, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';

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

/**
 * Starts tracing when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, and returns
 * undefined otherwise: then no provider, no interceptor and no exporter exist, so tracing costs nothing.
 * Registers the W3C propagator and an AsyncLocalStorage context manager globally, because Temporal's interceptors
 * inject and extract through the global API. Once per process; later calls return the same pipeline.
 * `OTEL_EXPORTER_OTLP_HEADERS` (e.g. Honeycomb's API key) is read by the exporter itself.
 */
export function startTracing(env: NodeJS.ProcessEnv, defaultServiceName: string): Tracing | undefined {
  if (installed) return installed;
  const url = tracesUrlFromEnv(env);
  if (!url) return undefined;
  const resource = new Resource({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || defaultServiceName });
  const spanProcessor = new BatchSpanProcessor(new OTLPTraceExporter({ url }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager(), propagator: new W3CTraceContextPropagator() });
  const tracer = provider.getTracer('agent-pipeline');
  installed = {
    tracer,
    spanProcessor,
    resource,
    url,
    shutdown: async () => {
      await provider.shutdown();
      installed = undefined;
    },
  };
  return installed;
}

/** The W3C `traceparent` (and `tracestate`) of `ctx`, or undefined when it holds no sampled span. */
export function traceHeaders(ctx: Context = context.active()): { traceparent?: string; tracestate?: string } {
  if (!trace.getSpanContext(ctx)) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return { traceparent: carrier.traceparent, tracestate: carrier.tracestate };
}
