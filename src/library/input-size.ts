import { defaultPayloadConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import { claimCheckCodecOf, withoutClaimCheck } from '../codec/claim-check-codec.js';
import { encodePayloads } from '../codec/data-converter.js';
import { STORE_VARIABLE } from '../store/store-settings.js';
import type { PipelineRunInput } from '../contracts/messages.js';
import { InvalidRequestError } from '../errors.js';

/**
 * Temporal refuses a workflow start whose input is larger than its blob size limit (`limit.blobSize.error`,
 * 2 MB unless the server is configured otherwise), with only "Blob data size exceeds limit".
 * @unit bytes
 */
export const TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024;

/**
 * A run's input may be this large when the client has a store (`AGENT_PIPELINE_STORE`): its large values travel by
 * reference (the claim check), and activities read them from the run as they need them. @unit bytes
 */
export const RUN_INPUT_MAX_BYTES_WITH_STORE = 64 * 1024 * 1024;

/** The size of `value` converted by the default payload converter, before any codec. @unit bytes */
export function encodedSize(value: unknown): number {
  return payloadSize(defaultPayloadConverter.toPayload(value));
}

function payloadSize(payload: Payload): number {
  return (payload.data?.byteLength ?? 0) + Object.entries(payload.metadata ?? {}).reduce((sum, [k, v]) => sum + k.length + v.byteLength, 0);
}

/**
 * The size of `value` as Temporal receives it: converted, then run through the client's codecs (encryption adds a
 * nonce, a tag and its metadata). @unit bytes
 */
export async function sizeOnTheWire(value: unknown, codecs: readonly PayloadCodec[]): Promise<number> {
  const [payload] = await encodePayloads(codecs, [defaultPayloadConverter.toPayload(value)]);
  return payloadSize(payload!);
}

/** `1.5 MB`, `900 KB`. */
export function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MB` : `${Math.ceil(bytes / 1024)} KB`;
}

/**
 * Checks, before anything is started, that a run's input fits in one Temporal payload, measured as it will be sent:
 * through `codecs`, the client's payload codecs.
 * @throws InvalidRequestError `INPUT_TOO_LARGE` with the size, the limit, what is largest and how to fix it
 */
export async function checkRunInputSize(input: PipelineRunInput, limit = TEMPORAL_PAYLOAD_LIMIT_BYTES, codecs: readonly PayloadCodec[] = []): Promise<PipelineRunInput> {
  // Measured without the claim check, which would write to the store; with one, the input goes there by reference.
  const limitBytes = claimCheckCodecOf(codecs)?.claimsToStore ? Math.max(limit, RUN_INPUT_MAX_BYTES_WITH_STORE) : limit;
  const size = await sizeOnTheWire(input, withoutClaimCheck(codecs));
  if (size <= limitBytes) return input;
  const parts = [
    ...Object.entries(input.inputs).map(([name, value]) => ({ what: `input "${name}"`, bytes: Buffer.byteLength(value) })),
    ...input.pipeline.stages.map((stage, i) => ({ what: `stages[${i}] (${stage.id}) of ${input.pipelineFile}`, bytes: encodedSize(stage) })),
  ].sort((a, b) => b.bytes - a.bytes);
  const largest = parts[0] ? `; the largest part is ${parts[0].what} (${formatBytes(parts[0].bytes)})` : '';
  throw new InvalidRequestError(
    'INPUT_TOO_LARGE',
    `[INPUT_TOO_LARGE] the run's input is ${formatBytes(size)} (${size} bytes), over ${limitBytes > limit ? 'the limit of a run with a store' : "Temporal's payload limit"} of ${formatBytes(limitBytes)}${largest}. ` +
      'Move large text into files: write it to a file next to the pipeline and list it under `context:`, or point a ' +
      'step template (`prompt: steps/x.md`) at it, and keep input values short.' +
      (limitBytes > limit ? '' : ` Or set ${STORE_VARIABLE} to the workers' store: inputs up to ${formatBytes(RUN_INPUT_MAX_BYTES_WITH_STORE)} then travel by reference.`),
  );
}
