import type { Payload } from '@temporalio/common';

/*
 * A payload as the bytes of its protobuf message (temporal.api.common.v1.Payload: `map<string, bytes> metadata = 1;
 * bytes data = 2;`), the form Temporal's encryption samples encrypt, so a codec in another language can read ours.
 * Written here in a few lines rather than by loading the whole generated proto package for one message.
 */

const LENGTH_DELIMITED = 2;

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** A length-delimited field: tag, length, bytes. */
function field(number: number, value: Uint8Array): Buffer[] {
  return [varint((number << 3) | LENGTH_DELIMITED), varint(value.byteLength), Buffer.from(value.buffer, value.byteOffset, value.byteLength)];
}

/** The payload's protobuf bytes. */
export function payloadToBytes(payload: Payload): Buffer {
  const parts: Buffer[] = [];
  for (const [key, value] of Object.entries(payload.metadata ?? {})) {
    const entry = Buffer.concat([...field(1, Buffer.from(key, 'utf8')), ...field(2, value)]);
    parts.push(...field(1, entry));
  }
  if (payload.data?.byteLength) parts.push(...field(2, payload.data));
  return Buffer.concat(parts);
}

/** Reads length-delimited fields; any other wire type means the bytes are not a payload. */
function* fields(bytes: Uint8Array): Generator<{ number: number; value: Uint8Array }> {
  let at = 0;
  const readVarint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (at >= bytes.length) throw new TypeError('truncated payload bytes');
      const byte = bytes[at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < bytes.length) {
    const tag = readVarint();
    if ((tag & 7) !== LENGTH_DELIMITED) throw new TypeError(`unexpected wire type ${tag & 7} in payload bytes`);
    const length = readVarint();
    if (at + length > bytes.length) throw new TypeError('truncated payload bytes');
    yield { number: tag >>> 3, value: bytes.subarray(at, at + length) };
    at += length;
  }
}

/** The payload whose protobuf bytes these are. */
export function payloadFromBytes(bytes: Uint8Array): Payload {
  const metadata: Record<string, Uint8Array> = {};
  let data = new Uint8Array(0);
  for (const { number, value } of fields(bytes)) {
    if (number === 2) data = Uint8Array.from(value);
    if (number !== 1) continue;
    let key = '';
    let entryValue = new Uint8Array(0);
    for (const entry of fields(value)) {
      if (entry.number === 1) key = Buffer.from(entry.value).toString('utf8');
      if (entry.number === 2) entryValue = Uint8Array.from(entry.value);
    }
    metadata[key] = entryValue;
  }
  return { metadata, data };
}
