import http from 'node:http';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BasicTracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, test } from 'vitest';
import { RetryingSpanExporter } from '../../src/telemetry/retrying-exporter.js';
import { startTracing } from '../../src/telemetry/tracing.js';

/** A collector that answers each POST by what `answer` says for it: drop the connection unanswered, or a status. */
async function collector(answer: (posts: number) => 'reset' | number): Promise<{ url: string; bodies: string[]; close(): Promise<void> }> {
  const bodies: string[] = [];
  let posts = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reply = answer(++posts);
      if (reply === 'reset') return void req.socket.destroy();
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(reply, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/v1/traces`, bodies, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function endedSpan(name: string): ReadableSpan {
  const span = new BasicTracerProvider().getTracer('test').startSpan(name);
  span.end();
  return span as unknown as ReadableSpan;
}

function exportOne(exporter: SpanExporter, name: string): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export([endedSpan(name)], resolve));
}

describe('span export retries', () => {
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });

  test('a batch whose connection the collector dropped unanswered is sent again and arrives', async () => {
    const dropsFirst = await collector((posts) => (posts === 1 ? 'reset' : 200));
    open.push(dropsFirst);
    // The exporter alone loses it: the failure it reports is the network's, with no status.
    const plain = await exportOne(new OTLPTraceExporter({ url: dropsFirst.url }), 'lost');
    expect(plain.code).toBe(ExportResultCode.FAILED);
    expect(dropsFirst.bodies).toEqual([]);

    const dropsAgain = await collector((posts) => (posts === 1 ? 'reset' : 200));
    open.push(dropsAgain);
    const retried = await exportOne(new RetryingSpanExporter(new OTLPTraceExporter({ url: dropsAgain.url })), 'kept');
    expect(retried.code).toBe(ExportResultCode.SUCCESS);
    expect(dropsAgain.bodies).toHaveLength(1);
    expect(dropsAgain.bodies[0]).toContain('"name":"kept"');
  });

  test('a batch the collector refuses is not sent again, and one it never takes is given up after three tries', async () => {
    const refuses = await collector(() => 400);
    open.push(refuses);
    const refused = await exportOne(new RetryingSpanExporter(new OTLPTraceExporter({ url: refuses.url })), 'refused');
    expect(refused.code).toBe(ExportResultCode.FAILED);
    expect(refuses.bodies).toHaveLength(1);

    let posts = 0;
    const alwaysDrops = await collector(() => (posts++, 'reset'));
    open.push(alwaysDrops);
    const dropped = await exportOne(new RetryingSpanExporter(new OTLPTraceExporter({ url: alwaysDrops.url })), 'dropped');
    expect(dropped.code).toBe(ExportResultCode.FAILED);
    expect(posts).toBe(3);
  });
  test('the worker is told once when batches start being dropped, and once when the collector takes them again', async () => {
    let up = false;
    const flaky = await collector(() => (up ? 200 : 'reset'));
    open.push(flaky);
    const warnings: string[] = [];
    const exporter = new RetryingSpanExporter(new OTLPTraceExporter({ url: `${flaky.url}?token=secret` }), { collector: new URL(flaky.url).origin, warn: (m) => warnings.push(m) });
    expect((await exportOne(exporter, 'first')).code).toBe(ExportResultCode.FAILED);
    expect((await exportOne(exporter, 'second')).code).toBe(ExportResultCode.FAILED);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`spans are being dropped: the collector at ${new URL(flaky.url).origin} did not take a batch`);
    expect(warnings[0]).toContain('after 3 tries');
    up = true;
    expect((await exportOne(exporter, 'third')).code).toBe(ExportResultCode.SUCCESS);
    expect((await exportOne(exporter, 'fourth')).code).toBe(ExportResultCode.SUCCESS);
    expect(warnings.slice(1)).toEqual([`the collector at ${new URL(flaky.url).origin} takes spans again; 2 span(s) were dropped meanwhile`]);
    expect(warnings.join('\n')).not.toContain('secret');
  });
  test("a command's last batch that no collector takes does not fail its shutdown (the command would fail and hang)", async () => {
    const gone = await collector(() => 200);
    await gone.close();
    const tracing = startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: new URL(gone.url).origin }, 'agent-pipeline-client')!;
    tracing.tracer.startSpan('StartWorkflow:pipelineWorkflow').end();
    await expect(tracing.shutdown()).resolves.toBeUndefined();
  });
});
