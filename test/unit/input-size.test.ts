import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../src/errors.js';
import { checkRunInputSize, encodedSize, formatBytes, TEMPORAL_PAYLOAD_LIMIT_BYTES } from '../../src/library/input-size.js';
import type { PipelineRunInput } from '../../src/workflows/messages.js';

const input = (feature: string): PipelineRunInput => ({
  pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'Build {{inputs.feature}}.' }] },
  baseDir: '/tmp',
  pipelineFile: 'p.yaml',
  inputs: { feature },
});

describe('the run input size check', () => {
  it('lets an input within the limit through', () => {
    expect(() => checkRunInputSize(input('dark mode'))).not.toThrow();
    expect(TEMPORAL_PAYLOAD_LIMIT_BYTES).toBe(2 * 1024 * 1024);
  });

  it('refuses a larger one with its size, the limit, the largest part and the fix', () => {
    const big = input('x'.repeat(3 * 1024 * 1024));
    expect(encodedSize(big)).toBeGreaterThan(3 * 1024 * 1024);
    expect(() => checkRunInputSize(big)).toThrow(InvalidRequestError);
    expect(() => checkRunInputSize(big)).toThrow(expect.objectContaining({ code: 'INPUT_TOO_LARGE' }));
    expect(() => checkRunInputSize(big)).toThrow(
      /^\[INPUT_TOO_LARGE\] the run's input is 3\.0 MB \(\d+ bytes\), over Temporal's payload limit of 2\.0 MB; the largest part is --input feature \(3\.0 MB\)\. Move large text into files/,
    );
  });

  it('formats sizes for people', () => {
    expect(formatBytes(900)).toBe('1 KB');
    expect(formatBytes(1536 * 1024)).toBe('1.5 MB');
  });
});
