import { readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { freeLoopbackPort } from '../../src/telemetry/metrics-server.js';
import { CLI, eventually, parseJson, runCli } from './cli-helpers.js';
import { waitForWaiting } from './workflow-helpers.js';

const FIXTURES = path.join(PROJECT_ROOT, 'test', 'fixtures', 'telemetry');

/** One span as the OTLP/HTTP JSON encoding carries it. */
interface OtlpSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
}

/**
 * A minimal OTLP/HTTP collector: keeps every span POSTed to /v1/traces (once: a batch the worker sent again after a
 * lost answer repeats its spans) and counts the other signals it is sent.
 */
async function startOtlpReceiver(): Promise<{ url: string; spans: OtlpSpan[]; otherPaths: string[]; close(): Promise<void> }> {
  const spans: OtlpSpan[] = [];
  const otherPaths: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
        const seen = new Set(spans.map((s) => s.spanId));
        for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans.filter((s) => !seen.has(s.spanId)));
      } else {
        otherPaths.push(req.url ?? '');
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, otherPaths, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function attr(span: OtlpSpan, key: string): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (!value) return undefined;
  const raw = value.stringValue ?? value.intValue ?? value.doubleValue ?? value.boolValue;
  return typeof raw === 'string' && 'intValue' in value ? Number(raw) : raw;
}

interface PromSample {
  labels?: Record<string, string>;
  value?: string;
}
interface PromFamily {
  name: string;
  type: string;
  metrics: PromSample[];
}

/** Every sample of the families called `name` (a family may be split where its series are not adjacent). */
function samplesOf(families: PromFamily[], name: string): PromSample[] {
  return families.filter((f) => f.name === name).flatMap((f) => f.metrics);
}

describe('traces and metrics', () => {
  let harness: Harness;
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let worker: ResultPromise | undefined;
  let env: NodeJS.ProcessEnv;
  let metricsUrl: string;

  beforeAll(async () => {
    harness = await createHarness('telemetry', { scenario: path.join(FIXTURES, 'scenario.yaml'), worker: false });
    receiver = await startOtlpReceiver();
    const metricsPort = await freeLoopbackPort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    env = {
      ...harness.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // Short batches, so spans arrive while the test waits rather than only at shutdown.
      OTEL_BSP_SCHEDULE_DELAY: '200',
      AGENT_PIPELINE_METRICS: `127.0.0.1:${metricsPort}`,
      AGENT_PIPELINE_AGENT_TELEMETRY: '1',
    };
    worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore' });
    await eventually(() => fetch(metricsUrl).then((r) => r.status, () => 0), (status) => status === 200, 90_000, 'the worker serving /metrics');
  });
  afterAll(async () => {
    worker?.kill('SIGTERM');
    await worker;
    await receiver?.close();
    await harness?.close();
  });

  test('a run is one trace: client, workflow, activities and one span per stage attempt; the agent gets the attempt span as TRACEPARENT', async () => {
    const result = await runCli(['start', path.join(FIXTURES, 'pipeline.yaml'), '--wait', '--json'], env, 240_000);
    expect(result.exitCode, result.all).toBe(0);
    const { runId } = parseJson<{ runId: string }>(result);

    const attempts = await eventually(
      async () => receiver.spans.filter((s) => s.name.startsWith('StageAttempt:') && attr(s, 'agent_pipeline.run_id') === runId),
      (found) => found.length === 3,
      60_000,
      'three stage attempt spans (probe, review failing once, review)',
    );
    const start = receiver.spans.find((s) => s.name === 'StartWorkflow:pipelineWorkflow');
    expect(start, receiver.spans.map((s) => s.name).join(', ')).toBeDefined();
    const trace = receiver.spans.filter((s) => s.traceId === start!.traceId);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const parentName = (s: OtlpSpan): string | undefined => (s.parentSpanId ? byId.get(s.parentSpanId)?.name : undefined);

    const runWorkflow = trace.filter((s) => s.name === 'RunWorkflow:pipelineWorkflow');
    expect(runWorkflow.map(parentName)).toEqual(['StartWorkflow:pipelineWorkflow']);
    const startActivities = trace.filter((s) => s.name === 'StartActivity:runStage');
    expect(startActivities.length).toBeGreaterThanOrEqual(2);
    expect(new Set(startActivities.map(parentName))).toEqual(new Set(['RunWorkflow:pipelineWorkflow']));
    const runActivities = trace.filter((s) => s.name === 'RunActivity:runStage');
    expect(runActivities).toHaveLength(3);
    expect(new Set(runActivities.map(parentName))).toEqual(new Set(['StartActivity:runStage']));
    // Every attempt span is in the run's trace, under the SDK's RunActivity span of its attempt.
    expect(attempts.every((s) => s.traceId === start!.traceId && parentName(s) === 'RunActivity:runStage')).toBe(true);

    const probe = attempts.find((s) => s.name === 'StageAttempt:probe')!;
    expect({
      stage: attr(probe, 'agent_pipeline.stage'),
      attempt: attr(probe, 'agent_pipeline.attempt'),
      backend: attr(probe, 'agent_pipeline.backend'),
      model: attr(probe, 'agent_pipeline.model'),
      input: attr(probe, 'agent_pipeline.tokens.input'),
      output: attr(probe, 'agent_pipeline.tokens.output'),
      outcome: attr(probe, 'agent_pipeline.outcome'),
    }).toEqual({ stage: 'probe', attempt: 1, backend: 'claude-cli', model: 'sonnet', input: 2600, output: 120, outcome: 'completed' });
    expect(attr(probe, 'agent_pipeline.cost_usd')).toBeGreaterThan(0);
    const reviews = attempts.filter((s) => s.name === 'StageAttempt:review').sort((a, b) => Number(attr(a, 'agent_pipeline.attempt')) - Number(attr(b, 'agent_pipeline.attempt')));
    expect(reviews.map((s) => [attr(s, 'agent_pipeline.attempt'), attr(s, 'agent_pipeline.outcome'), attr(s, 'agent_pipeline.failure_type') ?? null])).toEqual([
      [1, 'failed', 'SERVER_ERROR'],
      [2, 'completed', null],
    ]);
    expect(attr(reviews[1], 'agent_pipeline.tokens.input')).toBe(700);

    // The agent's own shell saw the attempt span as its parent, and Claude Code's telemetry switched on.
    const agentEnv = await readFile(path.join(harness.runDir(runId), 'agent-env.txt'), 'utf8');
    expect(agentEnv).toContain(`TRACEPARENT=00-${probe.traceId}-${probe.spanId}-01`);
    expect(agentEnv).toContain('CLAUDE_CODE_ENABLE_TELEMETRY=1');
    // Claude Code keeps its OTEL_* settings from the shells it starts, but uses them itself: its metrics and logs
    // reach the same collector.
    await eventually(async () => receiver.otherPaths, (paths) => paths.includes('/v1/metrics') || paths.includes('/v1/logs'), 60_000, 'Claude Code exporting its own telemetry');
  });

  test('/metrics serves the stage metrics and the SDK worker metrics in the Prometheus text format', async () => {
    // A run that waits for a person, so the waiting gauge has something to count. Started and awaited in process: what
    // this test reads is the worker's /metrics, and a command (or a status poll) costs a Node process each.
    const gated = await harness.start(path.join(FIXTURES, 'gate.yaml'));
    await waitForWaiting(gated, 'release', 'approval', 120_000);

    const text = await eventually(
      async () => (await fetch(metricsUrl)).text(),
      (body) => Number(samplesOf(parsePrometheusTextFormat(body) as PromFamily[], 'agent_pipeline_runs_waiting_for_person')[0]?.value) >= 1,
      60_000,
      'the waiting-runs gauge counting the gated run',
    );
    const families = parsePrometheusTextFormat(text) as PromFamily[];
    // The parser folds every series of a histogram into one unlabelled sample (it follows client_python 0.0.19), so
    // histogram series are read a second time as plain samples (`_bucket`, `_sum`, `_count`).
    const flat = parsePrometheusTextFormat(text.replace(/^# TYPE (\S+) histogram$/gm, '# TYPE $1 untyped')) as PromFamily[];
    const family = (name: string): PromFamily => {
      const found = families.find((f) => f.name === name);
      if (!found) throw new Error(`no ${name} in ${families.map((f) => f.name).join(', ')}`);
      return found;
    };
    const sample = (name: string, labels: Record<string, string>): PromSample | undefined =>
      samplesOf(flat, name).find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));

    expect(family('agent_pipeline_stage_duration_seconds').type).toBe('HISTOGRAM');
    expect(sample('agent_pipeline_stage_duration_seconds_count', { pipeline: 'telemetry', stage: 'probe', backend: 'claude-cli', outcome: 'completed' })?.value).toBe('1');
    expect(sample('agent_pipeline_stage_duration_seconds_count', { pipeline: 'telemetry', stage: 'review', backend: 'anthropic-api', outcome: 'failed' })?.value).toBe('1');
    expect(sample('agent_pipeline_stage_duration_seconds_count', { pipeline: 'telemetry', stage: 'review', backend: 'anthropic-api', outcome: 'completed' })?.value).toBe('1');
    expect(sample('agent_pipeline_stage_failures_total', { stage: 'review', type: 'SERVER_ERROR' })?.value).toBe('1');
    expect(sample('agent_pipeline_tokens_total', { stage: 'probe', direction: 'input' })?.value).toBe('2600');
    expect(sample('agent_pipeline_tokens_total', { stage: 'probe', direction: 'output' })?.value).toBe('120');
    expect(sample('agent_pipeline_tokens_total', { stage: 'review', direction: 'input' })?.value).toBe('700');
    expect(Number(sample('agent_pipeline_stage_cost_usd_total', { stage: 'probe', model: 'sonnet' })?.value)).toBeGreaterThan(0);
    expect(family('agent_pipeline_agents_running').metrics.every((m) => m.value === '0')).toBe(true);
    expect(family('agent_pipeline_runs_waiting_for_person').type).toBe('GAUGE');
    // The SDK's own worker metrics come through the same endpoint.
    expect(families.some((f) => f.name.startsWith('temporal_workflow_completed'))).toBe(true);
    expect(families.some((f) => f.name.startsWith('temporal_activity_execution'))).toBe(true);

    await gated.cancel();
  });

  test('without the OTLP variables neither the worker nor the client exports a span, and the agent gets no TRACEPARENT', async () => {
    const quietEnv: NodeJS.ProcessEnv = { ...harness.env, AGENT_PIPELINE_TASK_QUEUE: `${harness.taskQueue}-quiet` };
    delete quietEnv.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete quietEnv.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    delete quietEnv.AGENT_PIPELINE_METRICS;
    const quiet = execa('node', [CLI, 'worker'], { env: quietEnv, extendEnv: false, reject: false, stdin: 'ignore' });
    try {
      const result = await runCli(['start', path.join(FIXTURES, 'pipeline.yaml'), '--wait', '--json'], quietEnv, 240_000);
      expect(result.exitCode, result.all).toBe(0);
      const { runId } = parseJson<{ runId: string }>(result);
      const agentEnv = await readFile(path.join(harness.runDir(runId), 'agent-env.txt'), 'utf8');
      expect(agentEnv).toBe('');
      // Give a would-be batch time to arrive (the traced worker's delay is 200 ms) before looking for the run's spans.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(receiver.spans.filter((s) => s.attributes?.some((a) => Object.values(a.value).includes(runId)))).toEqual([]);
      await rm(harness.runDir(runId), { recursive: true, force: true });
    } finally {
      quiet.kill('SIGTERM');
      await quiet;
    }
  });
});
