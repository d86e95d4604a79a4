import type { Client } from '@temporalio/client';
import { decodeFirstPayload } from '../codec/data-converter.js';
import type { PipelineRunInput } from '../contracts/messages.js';

/**
 * A run's start input, from the first event of one of its executions (the latest when `runId` is absent): one page of
 * one event, whatever the length of the history. Decoded with the worker's own data converter, so an encrypted input
 * is decrypted with the worker's keys. Undefined when the history holds no input.
 */
export async function readRunStartInput(client: Client, namespace: string | undefined, execution: { workflowId: string; runId?: string | undefined }): Promise<Partial<PipelineRunInput> | undefined> {
  const response = await client.workflowService.getWorkflowExecutionHistory({ namespace: namespace ?? client.options.namespace, execution, maximumPageSize: 1 });
  const started = response.history?.events?.[0]?.workflowExecutionStartedEventAttributes;
  return decodeFirstPayload<Partial<PipelineRunInput>>(client.options.loadedDataConverter, started?.input);
}
