import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/errors.js';
import { randomBytes } from 'node:crypto';
import { payloadCodecsFor } from '../../src/codec/data-converter.js';
import { checkRunInputSize, encodedSize, formatBytes, sizeOnTheWire, TEMPORAL_PAYLOAD_LIMIT_BYTES } from '../../src/library/input-size.js';
import type { PipelineRunInput } from '../../src/contracts/messages.js';

const input = (feature: string): PipelineRunInput => ({
  pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'Build {{inputs.feature}}.' }] },
  baseDir: '/tmp',
  pipelineFile: 'p.yaml',
  inputs: { feature },
});

describe('the run input size check', () => {
  it('lets an input within the limit through', async () => {
    await expect(checkRunInputSize(input('dark mode'))).resolves.toEqual(input('dark mode'));
    expect(TEMPORAL_PAYLOAD_LIMIT_BYTES).toBe(2 * 1024 * 1024);
  });

  it('refuses a larger one with its size, the limit, the largest part and the fix', async () => {
    const big = input('x'.repeat(3 * 1024 * 1024));
    expect(encodedSize(big)).toBeGreaterThan(3 * 1024 * 1024);
    await expect(checkRunInputSize(big)).rejects.toThrow(InvalidRequestError);
    await expect(checkRunInputSize(big)).rejects.toThrow(expect.objectContaining({ code: 'INPUT_TOO_LARGE' }));
    await expect(checkRunInputSize(big)).rejects.toThrow(
      /^\[INPUT_TOO_LARGE\] the run's input is 3\.0 MB \(\d+ bytes\), over Temporal's payload limit of 2\.0 MB; the largest part is input "feature" \(3\.0 MB\)\. Move large text into files/,
    );
  });

  it('measures the size the codecs send: an input just under the limit unencrypted is over it encrypted', async () => {
    const codecs = payloadCodecsFor(`k1:${randomBytes(32).toString('base64')}`);
    const plainSize = encodedSize(input(''));
    const edge = input('x'.repeat(TEMPORAL_PAYLOAD_LIMIT_BYTES - plainSize - 4));
    expect(await sizeOnTheWire(edge, [])).toBeLessThanOrEqual(TEMPORAL_PAYLOAD_LIMIT_BYTES);
    expect(await sizeOnTheWire(edge, codecs)).toBeGreaterThan(TEMPORAL_PAYLOAD_LIMIT_BYTES);
    await expect(checkRunInputSize(edge)).resolves.toBe(edge);
    await expect(checkRunInputSize(edge, TEMPORAL_PAYLOAD_LIMIT_BYTES, codecs)).rejects.toThrow(expect.objectContaining({ code: 'INPUT_TOO_LARGE' }));
  });

  it('formats sizes for people', () => {
    expect(formatBytes(900)).toBe('1 KB');
    expect(formatBytes(1536 * 1024)).toBe('1.5 MB');
  });
});
