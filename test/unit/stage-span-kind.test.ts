import { InMemorySpanExporter, BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor } from '@temporalio/worker';
import { describe, expect, test } from 'vitest';
import { stageTelemetryInterceptor } from '../../src/telemetry/stage-interceptor.js';

/* The span of a stage attempt names the stage's kind (issue 31), so a trace tells a command from an agent. */

async function spanOf(stage: Record<string, unknown>): Promise<Record<string, unknown>> {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const ctx = { info: { activityType: 'runStage', attempt: 1, workflowExecution: { workflowId: 'run-1' } }, cancellationSignal: new AbortController().signal };
  const interceptors = stageTelemetryInterceptor(provider.getTracer('test'), undefined)(ctx as never) as { inbound: ActivityInboundCallsInterceptor };
  const input = { args: [{ runId: 'run-1', pipelineName: 'p', round: 1, stage }], headers: {} } as unknown as ActivityExecuteInput;
  await interceptors.inbound.execute!(input, async () => ({ status: 'completed', summary: '', outputs: {}, costUsd: 0 }));
  return exporter.getFinishedSpans()[0]!.attributes;
}

describe('the StageAttempt span', () => {
  test('says `command` for a stage with `run:` and `agent` for the others', async () => {
    expect(await spanOf({ id: 'test', backend: 'command', model: '', run: 'npm test' })).toMatchObject({ 'agent_pipeline.stage_kind': 'command', 'agent_pipeline.backend': 'command' });
    expect(await spanOf({ id: 'spec', backend: 'claude-cli', model: 'sonnet' })).toMatchObject({ 'agent_pipeline.stage_kind': 'agent' });
  });
});
