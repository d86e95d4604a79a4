import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { RetryingSpanExporter } from './retrying-exporter.js';
import { installedTracing, setInstalledTracing, tracesUrlFromEnv, type Tracing } from './tracing-state.js';

/**
 * Starts tracing when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, and returns
 * undefined otherwise: then no provider, no interceptor and no exporter exist, so tracing costs nothing.
 * Registers the W3C propagator and an AsyncLocalStorage context manager globally, because Temporal's interceptors
 * inject and extract through the global API. Once per process; later calls return the same pipeline.
 * `OTEL_EXPORTER_OTLP_HEADERS` (e.g. Honeycomb's API key) is read by the exporter itself.
 * `retryExports` sends a batch again after a network failure (a worker's spans outlive a collector's restart) and
 * tells its `warn` when batches start being dropped and when they go through again; a command leaves it out, so that
 * an unreachable collector does not hold up its exit.
 */
export function startTracing(env: NodeJS.ProcessEnv, defaultServiceName: string, { retryExports }: { retryExports?: { warn(message: string): void } } = {}): Tracing | undefined {
  const running = installedTracing();
  if (running) return running;
  const url = tracesUrlFromEnv(env);
  if (!url) return undefined;
  const resource = new Resource({ 'service.name': env.OTEL_SERVICE_NAME?.trim() || defaultServiceName });
  const exporter = new OTLPTraceExporter({ url });
  const spanProcessor = new BatchSpanProcessor(retryExports ? new RetryingSpanExporter(exporter, { collector: originOf(url), warn: retryExports.warn }) : exporter);
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register({ contextManager: new AsyncLocalStorageContextManager(), propagator: new W3CTraceContextPropagator() });
  const tracer = provider.getTracer('agent-pipeline');
  const tracing: Tracing = {
    tracer,
    spanProcessor,
    resource,
    url,
    shutdown: async () => {
      // The last batch failing (a collector gone) must not fail the command or stop the worker's clean-up after it: a
      // worker has warned of it already (RetryingSpanExporter), and a command's spans are dropped as any batch is.
      await provider.shutdown().catch(() => {});
      setInstalledTracing(undefined);
    },
  };
  setInstalledTracing(tracing);
  return tracing;
}

/** Where spans go, for a warning: the URL's origin only, since a path or query may carry a token. */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'the OTLP endpoint';
  }
}
