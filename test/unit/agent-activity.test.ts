import { describe, expect, test } from 'vitest';
import { AGENT_TEXT_MAX_CHARS, AgentActivityTracker, summarizeToolInput, TOOL_INPUT_MAX_CHARS } from '../../src/activities/backends/agent-activity.js';
import { SecretRegistry } from '../../src/activities/secrets.js';

/* What an agent's heartbeats tell a client following its stage: bounded whatever the agent does, never a secret. */

describe('agent activity in heartbeats', () => {
  test('a tool call shows the field that says what it does, else compact JSON, cut to a bound', () => {
    expect(summarizeToolInput('Bash', { command: 'npm   test\n--silent', description: 'tests' })).toBe('npm test --silent');
    expect(summarizeToolInput('Read', { file_path: 'src/a.ts' })).toBe('src/a.ts');
    expect(summarizeToolInput('mcp__db__query', { sql: 'select 1' })).toBe('{"sql":"select 1"}');
    const long = summarizeToolInput('Write', { file_path: 'x'.repeat(10_000) });
    expect(long.length).toBe(TOOL_INPUT_MAX_CHARS);
    expect(long.endsWith('…')).toBe(true);
  });

  test('keeps the end of the latest text and the latest tool call, with the worker’s secrets redacted', () => {
    const secret = 'sk-ant-secret-value-123456';
    const registry = new SecretRegistry([secret]);
    const tracker = registry.run(() => new AgentActivityTracker());
    expect(tracker.activity).toBeUndefined();
    tracker.toolCall('Bash', { command: `curl -H "x-api-key: ${secret}" https://api.example.com` });
    tracker.text(`${'a'.repeat(5_000)} the key is ${secret}`);
    const activity = tracker.activity!;
    expect(activity.toolCalls).toBe(1);
    expect(activity.tool).toEqual({ name: 'Bash', input: 'curl -H "x-api-key: <redacted>" https://api.example.com' });
    expect(activity.text!.length).toBe(AGENT_TEXT_MAX_CHARS);
    expect(activity.text!.endsWith('the key is <redacted>')).toBe(true);
    expect(JSON.stringify(activity)).not.toContain(secret);
  });
});
