import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import { decodePayloadList, decodePayloads } from '../codec/data-converter.js';

/*
 * History and descriptions as the service returns them hold payloads as the codecs left them: encrypted when
 * AGENT_PIPELINE_ENCRYPTION_KEY is set. What this project reads from them itself (the run rebuilt from history,
 * the stage of an activity, a heartbeat's progress, a failure's message) is decoded here first, with the codecs of
 * the client that read it, so readers keep decoding plain payloads.
 */

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];
type Failure = NonNullable<NonNullable<HistoryEvent['activityTaskFailedEventAttributes']>['failure']>;

/** The codecs of a client's data converter (none when encryption is off). */
export function clientCodecs(client: Client): PayloadCodec[] {
  return client.options.loadedDataConverter.payloadCodecs;
}

/**
 * A failure with its payloads decoded and, when its message and stack trace were encoded (`Encoded failure`), those
 * restored from its encoded attributes; its causes too. The same object when there is nothing to decode.
 */
export async function decodeFailure<F extends Failure | null | undefined>(codecs: readonly PayloadCodec[], failure: F): Promise<F> {
  if (!failure || (codecs.length === 0 && !failure.encodedAttributes)) return failure;
  const decoded: Failure = { ...failure, cause: await decodeFailure(codecs, failure.cause) } as Failure;
  if (failure.encodedAttributes) {
    const [attributes] = await decodePayloads(codecs, [failure.encodedAttributes as Payload]);
    try {
      const { message, stack_trace } = defaultPayloadConverter.fromPayload<{ message?: string; stack_trace?: string }>(attributes!);
      if (typeof message === 'string') decoded.message = message;
      if (typeof stack_trace === 'string') decoded.stackTrace = stack_trace;
    } catch {
      // Attributes a converter of another kind wrote: the message stays "Encoded failure".
    }
  }
  return decoded as F;
}

/**
 * The event with the payloads and failures the history readers use decoded: the run's start input, stage attempt
 * inputs and results, and activity failures. Other events are returned as they are.
 */
export async function decodeHistoryEvent(codecs: readonly PayloadCodec[], event: HistoryEvent): Promise<HistoryEvent> {
  if (codecs.length === 0) return event;
  const started = event.workflowExecutionStartedEventAttributes;
  if (started) return { ...event, workflowExecutionStartedEventAttributes: { ...started, input: await decodePayloadList(codecs, started.input) } } as HistoryEvent;
  const scheduled = event.activityTaskScheduledEventAttributes;
  if (scheduled) return { ...event, activityTaskScheduledEventAttributes: { ...scheduled, input: await decodePayloadList(codecs, scheduled.input) } } as HistoryEvent;
  const completed = event.activityTaskCompletedEventAttributes;
  if (completed) return { ...event, activityTaskCompletedEventAttributes: { ...completed, result: await decodePayloadList(codecs, completed.result) } } as HistoryEvent;
  const failed = event.activityTaskFailedEventAttributes;
  if (failed) return { ...event, activityTaskFailedEventAttributes: { ...failed, failure: await decodeFailure(codecs, failed.failure) } } as HistoryEvent;
  const timedOut = event.activityTaskTimedOutEventAttributes;
  if (timedOut) return { ...event, activityTaskTimedOutEventAttributes: { ...timedOut, failure: await decodeFailure(codecs, timedOut.failure) } } as HistoryEvent;
  return event;
}
