import { describe, expect, test } from 'vitest';
import { CliEventReader } from '../../src/activities/backends/claude-cli/events.js';
import type { ModelCatalog } from '../../src/activities/backends/models.js';

const MODELS: ModelCatalog = { aliases: { sonnet: 'claude-sonnet-x' }, prices: { 'claude-sonnet-x': { input: 3, output: 15 } } };

const start = (id: string, usage: Record<string, number>) => ({
  type: 'stream_event', session_id: 's', event: { type: 'message_start', message: { id, model: 'claude-sonnet-x', usage: { output_tokens: 1, ...usage } } },
});
const delta = (id: string, output: number) => ({ type: 'stream_event', api_message_id: id, event: { type: 'message_delta', usage: { output_tokens: output } } });
const text = (id: string, value: string) => ({ type: 'assistant', message: { id, model: 'claude-sonnet-x', usage: { input_tokens: 1_000, output_tokens: 1 }, content: [{ type: 'text', text: value }] } });

describe('CliEventReader', () => {
  test('sums cost per model message while streaming, counting each message once and cache tokens at their price', () => {
    const reader = new CliEventReader('initial', MODELS);
    reader.read(start('m1', { input_tokens: 1_000, cache_creation_input_tokens: 1_000, cache_read_input_tokens: 10_000 }));
    reader.read(text('m1', 'Looking.'));
    reader.read({ type: 'assistant', message: { id: 'm1', model: 'claude-sonnet-x', usage: { input_tokens: 1_000, output_tokens: 1 }, content: [{ type: 'tool_use' }] } });
    reader.read(delta('m1', 200));
    reader.read(start('m2', { input_tokens: 2_000 }));
    reader.read(delta('m2', 100));
    // (1000 + 1.25×1000 + 0.1×10000) × $3/M + 200 × $15/M, then 2000 × $3/M + 100 × $15/M.
    // Input at full price apart from the cache's reads and writes, as the API reports it.
    expect(reader.progress()).toMatchObject({ sessionId: 's', turns: 2, usage: { inputTokens: 3_000, outputTokens: 300, cacheReadTokens: 10_000, cacheWriteTokens: 1_000 } });
    expect(reader.progress().costUsd).toBeCloseTo((3_250 * 3 + 200 * 15 + 2_000 * 3 + 100 * 15) / 1e6, 10);
    expect(reader.lastAssistantText).toBe('Looking.');

    reader.read({ type: 'result', subtype: 'success', is_error: false, result: 'done', total_cost_usd: 0.5, num_turns: 3 });
    expect(reader.progress()).toMatchObject({ costUsd: 0.5, turns: 3 });
  });

  test('tells which files the agent\'s writing tool calls name, as the calls arrive', () => {
    const written: string[] = [];
    const reader = new CliEventReader('s', MODELS, (file) => written.push(file));
    const call = (name: string, input: unknown) => ({ type: 'assistant', message: { id: 'm', model: 'claude-sonnet-x', content: [{ type: 'tool_use', name, input }] } });
    reader.read(call('Write', { file_path: '/w/a.txt', content: 'x' }));
    reader.read(call('Edit', { file_path: 'docs/b.md', old_string: '', new_string: 'y' }));
    reader.read(call('NotebookEdit', { notebook_path: 'n.ipynb', new_source: '' }));
    reader.read(call('Bash', { command: 'echo > c.txt' }));
    reader.read(call('Read', { file_path: '/w/a.txt' }));
    reader.read(call('Write', { content: 'no path' }));
    expect(written).toEqual(['/w/a.txt', 'docs/b.md', 'n.ipynb']);
  });

  test('counts text, tool calls and tool results as output, but not the CLI\'s own bookkeeping', () => {
    const reader = new CliEventReader('s', MODELS);
    expect(reader.read({ type: 'system', subtype: 'init', mcp_servers: [{ name: 'ok', status: 'connected' }, { name: 'bad', status: 'failed' }] })).toBe(false);
    expect(reader.read({ type: 'system', subtype: 'status', status: 'requesting' })).toBe(false);
    expect(reader.read(start('m1', { input_tokens: 5 }))).toBe(false);
    expect(reader.sawOutput).toBe(false);
    expect(reader.read({ type: 'stream_event', event: { type: 'content_block_delta', delta: { type: 'text_delta', text: 'h' } } })).toBe(true);
    expect(reader.read({ type: 'user', message: { content: [{ type: 'tool_result' }] } })).toBe(true);
    // An API error arrives as a synthetic assistant message: not the agent's output.
    expect(reader.read({ type: 'assistant', message: { id: 'e', model: '<synthetic>', content: [{ type: 'text', text: 'API Error' }] } })).toBe(false);
    expect(reader.read('not an event')).toBe(false);
    expect(reader.failedMcpServers).toEqual(['bad']);
  });

  test('records a model fallback and the delay the CLI announced before retrying a 429', () => {
    const reader = new CliEventReader('s', MODELS);
    reader.read({ type: 'system', subtype: 'model_fallback', original_model: 'opus', fallback_model: 'sonnet', trigger: 'overloaded' });
    reader.read({ type: 'system', subtype: 'api_retry', error_status: 529, retry_delay_ms: 600 });
    reader.read({ type: 'system', subtype: 'api_retry', error_status: 429, retry_delay_ms: 7_400 });
    expect(reader.fallback).toEqual({ from: 'opus', to: 'sonnet', trigger: 'overloaded' });
    expect(reader.rateLimitDelayMs).toBe(7_400);
  });
});
