import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { computeCostUsd, DEFAULT_MODELS, loadModelCatalog, priceOf, resolveModelId } from '../../src/activities/backends/models.js';

describe('the model catalogue', () => {
  it('maps tiers to model ids and passes other names through', () => {
    expect(resolveModelId('opus', DEFAULT_MODELS)).toBe('claude-opus-5-5');
    expect(resolveModelId('haiku', DEFAULT_MODELS)).toBe('claude-haiku-5-5');
    expect(resolveModelId('claude-custom-1', DEFAULT_MODELS)).toBe('claude-custom-1');
  });

  it('prices usage per million tokens, and gives null for a model with no price', () => {
    expect(computeCostUsd('claude-sonnet-5-5', { inputTokens: 1_000_000, outputTokens: 100_000 }, DEFAULT_MODELS)).toBeCloseTo(3);
    expect(computeCostUsd('claude-unknown', { inputTokens: 10, outputTokens: 10 }, DEFAULT_MODELS)).toBeNull();
  });

  it('prices cache reads at 0.1× and cache writes at 1.25× the input price unless the table says otherwise', () => {
    const catalog0 = loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"prices": {"claude-x": {"input": 2, "output": 10}}}' });
    expect(priceOf('claude-x', catalog0)).toEqual({ input: 2, output: 10, cacheRead: 0.2, cacheWrite: 2.5 });
    const usage = { inputTokens: 1_000_000, outputTokens: 1_000_000, cacheReadTokens: 10_000_000, cacheWriteTokens: 2_000_000 };
    // 2 + 10 + 10 × 0.2 + 2 × 2.5
    expect(computeCostUsd('claude-x', usage, catalog0)).toBeCloseTo(19);
    // The built-in models' cache reads cost what the pinned CLI charges for them.
    expect(priceOf('claude-sonnet-5-5', DEFAULT_MODELS)).toEqual({ input: 2, output: 10, cacheRead: 0.1, cacheWrite: 2.5 });
    const catalog = loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"prices": {"claude-sonnet-5-5": {"input": 2, "output": 10, "cacheRead": 0.5, "cacheWrite": 4}}}' });
    expect(computeCostUsd('claude-sonnet-5-5', usage, catalog)).toBeCloseTo(2 + 10 + 5 + 8);
    expect(() => loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"prices": {"m": {"input": 1, "output": 1, "cacheRead": -1}}}' })).toThrow(/prices\.m\.cacheRead/);
  });

  it('takes overrides from AGENT_PIPELINE_MODELS as JSON, merged over the defaults', () => {
    const catalog = loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"aliases": {"sonnet": "claude-sonnet-x"}, "prices": {"claude-sonnet-x": {"input": 1, "output": 2}}}' });
    expect(resolveModelId('sonnet', catalog)).toBe('claude-sonnet-x');
    expect(resolveModelId('opus', catalog)).toBe('claude-opus-5-5');
    expect(computeCostUsd('claude-sonnet-x', { inputTokens: 1_000_000, outputTokens: 1_000_000 }, catalog)).toBe(3);
  });

  it('takes overrides from a file named by AGENT_PIPELINE_MODELS', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'models-'));
    try {
      const file = path.join(dir, 'models.json');
      await writeFile(file, JSON.stringify({ prices: { 'claude-opus-5-5': { input: 10, output: 50 } } }));
      expect(loadModelCatalog({ AGENT_PIPELINE_MODELS: file }).prices['claude-opus-5-5']).toEqual({ input: 10, output: 50 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses a broken table with a message naming the variable and the problem', () => {
    expect(() => loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"prices": {' })).toThrow(/AGENT_PIPELINE_MODELS is not valid JSON/);
    expect(() => loadModelCatalog({ AGENT_PIPELINE_MODELS: '{"prices": {"m": {"input": "cheap"}}}' })).toThrow(/AGENT_PIPELINE_MODELS is invalid: prices\.m\.input/);
    expect(() => loadModelCatalog({ AGENT_PIPELINE_MODELS: '/nonexistent/models.json' })).toThrow(/cannot read the AGENT_PIPELINE_MODELS file \/nonexistent\/models\.json \(ENOENT\)/);
    // The library promises ConfigError (code CONFIG_INVALID) for a setting it cannot use.
    for (const setting of ['{"prices": {', '{"prices": {"m": {"input": "cheap"}}}', '/nonexistent/models.json']) {
      expect(() => loadModelCatalog({ AGENT_PIPELINE_MODELS: setting })).toThrow(expect.objectContaining({ name: 'ConfigError', code: 'CONFIG_INVALID', message: expect.stringMatching(/^\[CONFIG_INVALID\] /) }));
    }
  });

  it('uses the defaults when nothing is set', () => {
    expect(loadModelCatalog({})).toBe(DEFAULT_MODELS);
  });
});
