import type { Payload } from '@temporalio/common';

/** Every payload in a history (anything with `metadata.encoding`), found by walking its events. */
export function payloadsIn(value: unknown, found: Payload[] = []): Payload[] {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return found;
  const record = value as Record<string, unknown>;
  // A payload has metadata with an encoding; an empty `data` does not survive protobuf, so it is not looked for.
  const metadata = record.metadata as Record<string, unknown> | undefined;
  if (metadata && typeof metadata === 'object' && ArrayBuffer.isView(metadata.encoding)) found.push(record as Payload);
  else for (const child of Object.values(record)) payloadsIn(child, found);
  return found;
}
