import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/** Tries per batch, and the wait before the second and third: 1 s and 2 s, inside the batch processor's 30 s. */
const TRIES = 3;
const FIRST_BACKOFF_MS = 1_000;

/**
 * Sends a batch again when its export failed without an answer from the collector: a refused or reset connection
 * (a collector restarting, a kept-alive connection it closed as the batch went out) or a timeout. The OTLP/HTTP
 * specification asks clients to retry these; the pinned exporter (0.57, the line Temporal's interceptors build on)
 * retries only the statuses a collector answers with (429, 502, 503, 504) and drops the batch on any other failure.
 * A collector's answer is final here: a refusal (a 400, a 401) would be refused again, and the exporter has already
 * tried a retryable status again.
 */
export class RetryingSpanExporter implements SpanExporter {
  /** Spans dropped since the last batch that went through; a warning starts and one ends each such streak. */
  private dropped = 0;

  /** `warn` is told when batches start being dropped and when the collector takes them again (`collector` names it). */
  constructor(
    private readonly exporter: SpanExporter,
    private readonly report?: { collector: string; warn(message: string): void },
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const attempt = (tried: number): void => {
      this.exporter.export(spans, (result) => {
        if (result.code === ExportResultCode.SUCCESS || tried >= TRIES || answeredByCollector(result.error)) {
          this.tell(result, spans.length, tried);
          return done(result);
        }
        setTimeout(() => attempt(tried + 1), FIRST_BACKOFF_MS * 2 ** (tried - 1));
      });
    };
    attempt(1);
  }

  /** Warns at the first dropped batch of a streak and when one goes through again; silent in between. */
  private tell(result: ExportResult, spans: number, tried: number): void {
    if (result.code === ExportResultCode.SUCCESS) {
      if (this.dropped > 0) this.report?.warn(`the collector at ${this.report.collector} takes spans again; ${this.dropped} span(s) were dropped meanwhile`);
      this.dropped = 0;
      return;
    }
    if (this.dropped === 0) {
      const how = answeredByCollector(result.error) ? 'it refused them' : `after ${tried} tries`;
      this.report?.warn(`spans are being dropped: the collector at ${this.report.collector} did not take a batch (${result.error?.message ?? 'no reason given'}; ${how}); check OTEL_EXPORTER_OTLP_* and the collector`);
    }
    this.dropped += spans;
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * The exporter reports a collector's answer (a refusal, or a retryable status it already tried again) as an
 * `OTLPExporterError`; a connection that failed or timed out comes as the network's own error.
 */
function answeredByCollector(error: Error | undefined): boolean {
  return error?.name === 'OTLPExporterError';
}
