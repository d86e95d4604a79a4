import { DefaultPayloadConverter, type Payload, type PayloadConverter } from '@temporalio/common';
import { markUnencrypted, UNENCRYPTED_METADATA } from '../contracts/payload-origin.js';

/*
 * The payload converter of workers that encrypt (loaded by path: Temporal bundles it into the workflow code and
 * requires it on the worker's main thread). It converts as the default converter does, and hangs the codec's mark of a
 * payload that arrived unencrypted on the value, so that update validators can refuse a message no key holder wrote
 * (contracts/payload-origin.ts). Imports nothing but @temporalio/common and that module.
 */
class MarkingPayloadConverter implements PayloadConverter {
  private readonly inner = new DefaultPayloadConverter();

  toPayload<T>(value: T): Payload {
    return this.inner.toPayload(value);
  }

  fromPayload<T>(payload: Payload): T {
    const value = this.inner.fromPayload<T>(payload);
    return payload.metadata?.[UNENCRYPTED_METADATA] ? markUnencrypted(value) : value;
  }
}

export const payloadConverter = new MarkingPayloadConverter();
