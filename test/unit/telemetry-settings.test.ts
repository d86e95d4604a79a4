import { describe, expect, test } from 'vitest';
import { agentTelemetryEnv } from '../../src/telemetry/agent-env.js';
import { parseMetricsAddress } from '../../src/telemetry/metrics-server.js';
import { ownShare } from '../../src/telemetry/stage-interceptor.js';
import { tracesUrlFromEnv } from '../../src/telemetry/tracing-state.js';

describe('telemetry settings', () => {
  test('the traces URL follows the OTLP variables: the traces endpoint as is, else the base endpoint plus /v1/traces', () => {
    expect(tracesUrlFromEnv({})).toBeUndefined();
    expect(tracesUrlFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toBe('http://collector:4318/v1/traces');
    expect(tracesUrlFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://api.honeycomb.io/v1/traces' })).toBe(
      'https://api.honeycomb.io/v1/traces',
    );
  });

  test('AGENT_PIPELINE_METRICS is host:port; a bad value names the variable and the form', () => {
    expect(parseMetricsAddress('127.0.0.1:9464')).toEqual({ host: '127.0.0.1', port: 9464 });
    // Issue 19, reproduction 7: without a host, the endpoint (no authentication) is for this host only.
    expect(parseMetricsAddress(':9464')).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(parseMetricsAddress('9464')).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(parseMetricsAddress('0.0.0.0:9464')).toEqual({ host: '0.0.0.0', port: 9464 });
    expect(parseMetricsAddress('[::1]:9464')).toEqual({ host: '::1', port: 9464 });
    expect(() => parseMetricsAddress('x9464')).toThrow(/AGENT_PIPELINE_METRICS=x9464 is not host:port/);
    expect(() => parseMetricsAddress('host:99999')).toThrow(/not host:port/);
  });

  test("an attempt's own tokens and cost are its running totals less the earlier attempts'", () => {
    expect(ownShare({ costUsd: 0.5, usage: { inputTokens: 300, outputTokens: 30 } }, { costUsd: 0.2, usage: { inputTokens: 100, outputTokens: 10 } })).toEqual({
      input: 200,
      output: 20,
      cache: 0,
      costUsd: 0.3,
    });
    expect(ownShare(undefined, { costUsd: 1 })).toEqual({ input: 0, output: 0, cache: 0, costUsd: 0 });
    // Cache reads and writes count as the `cache` direction.
    const cached = { costUsd: 0.1, usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 900, cacheWriteTokens: 100 } };
    expect(ownShare(cached, undefined)).toMatchObject({ input: 10, output: 5, cache: 1_000 });
  });

  test("without tracing or AGENT_PIPELINE_AGENT_TELEMETRY the agent gets no telemetry variables; with it, Claude Code's", () => {
    expect(agentTelemetryEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual({});
    expect(agentTelemetryEnv({ AGENT_PIPELINE_AGENT_TELEMETRY: '1', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRICS_EXPORTER: 'console' }, { runId: 'r 1', stage: 's', attempt: 2 })).toEqual({
      CLAUDE_CODE_ENABLE_TELEMETRY: '1',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      // The operator's own choice wins over the default.
      OTEL_METRICS_EXPORTER: 'console',
      OTEL_LOGS_EXPORTER: 'otlp',
      OTEL_RESOURCE_ATTRIBUTES: 'agent_pipeline.run_id=r%201,agent_pipeline.stage=s,agent_pipeline.attempt=2',
    });
  });
});
