import { context, propagation, trace, type Context as TraceContext } from '@opentelemetry/api';
import { Context } from '@temporalio/activity';

/** What an agent's telemetry is tagged with, so its own metrics and logs can be joined to the stage attempt. */
export interface AgentTelemetryTags {
  runId?: string;
  stage?: string;
  attempt?: number;
}

/**
 * Telemetry variables for one agent process, added to its allow-listed environment:
 * - `TRACEPARENT` (and `TRACESTATE`): the W3C context of the active stage attempt span, so anything the agent
 *   traces becomes a child of that attempt. Present only while tracing is on.
 * - With `AGENT_PIPELINE_AGENT_TELEMETRY=1`: Claude Code's own telemetry (`CLAUDE_CODE_ENABLE_TELEMETRY=1`, OTLP
 *   metrics and logs over HTTP) sent to the same collector as the worker's spans, every `OTEL_*` variable the worker
 *   got passed on (so an operator can override any of the defaults), and the run, stage and attempt added to
 *   `OTEL_RESOURCE_ATTRIBUTES`.
 */
export function agentTelemetryEnv(env: NodeJS.ProcessEnv, tags: AgentTelemetryTags = {}): Record<string, string> {
  const out: Record<string, string> = {};
  const { traceparent, tracestate } = traceHeaders();
  if (traceparent) out.TRACEPARENT = traceparent;
  if (tracestate) out.TRACESTATE = tracestate;
  if (env.AGENT_PIPELINE_AGENT_TELEMETRY !== '1') return out;

  const passed = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[0].startsWith('OTEL_') && e[1] !== undefined));
  const runId = tags.runId ?? currentRunId();
  const resource = [
    env.OTEL_RESOURCE_ATTRIBUTES,
    runId && `agent_pipeline.run_id=${encodeURIComponent(runId)}`,
    tags.stage && `agent_pipeline.stage=${encodeURIComponent(tags.stage)}`,
    tags.attempt !== undefined && `agent_pipeline.attempt=${tags.attempt}`,
  ].filter(Boolean);
  return {
    ...out,
    CLAUDE_CODE_ENABLE_TELEMETRY: '1',
    // The worker exports OTLP over HTTP; Claude Code's default protocol would be gRPC, which an HTTP-only collector refuses.
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_METRICS_EXPORTER: 'otlp',
    OTEL_LOGS_EXPORTER: 'otlp',
    ...passed,
    ...(resource.length ? { OTEL_RESOURCE_ATTRIBUTES: resource.join(',') } : {}),
  };
}

/** The run id (workflow id) of the activity this is called in, if any. */
function currentRunId(): string | undefined {
  try {
    return Context.current().info.workflowExecution?.workflowId;
  } catch {
    return undefined; // not inside an activity (a unit test calling a backend directly)
  }
}

/** The W3C `traceparent` (and `tracestate`) of `ctx`, or undefined when it holds no sampled span. */
function traceHeaders(ctx: TraceContext = context.active()): { traceparent?: string; tracestate?: string } {
  if (!trace.getSpanContext(ctx)) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return { traceparent: carrier.traceparent, tracestate: carrier.tracestate };
}
