import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { runCli } from './cli-helpers.js';

/*
 * Issue 33, item 13: redaction missed object keys. An agent (real claude, scripted model) wrote its report with the
 * worker's GH_TOKEN as a key of `outputs`, spelled with a JSON `\u` escape so that no text the agent printed held the
 * secret as it is; once the worker parsed the report, the key was the secret, in plain text in the run's history and
 * in `status --json`.
 */

const SECRET = 'ghp_keyLeak0a1b2c3d4e5f6071829';
/** The secret as a JSON string's content with its first letter escaped: `\u0067hp_…`. */
const ESCAPED = `\\u${SECRET.charCodeAt(0).toString(16).padStart(4, '0')}${SECRET.slice(1)}`;
const REPORT = [
  'Reporting.',
  '```json',
  `{"success": true, "summary": "done", "outputs": {"${ESCAPED}": "value", "nested": {"deep": {"${ESCAPED}-2": 1}}, "list": [{"${ESCAPED}": true}]}}`,
  '```',
].join('\n');

/** A history as JSON, with each payload's base64 data decoded next to it. */
function historyText(json: string): string {
  const decoded = [...json.matchAll(/"data":"([A-Za-z0-9+/=]+)"/g)].map((m) => Buffer.from(m[1], 'base64').toString('utf8'));
  return `${json}\n${decoded.join('\n')}`;
}

describe('redaction of object keys', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await createHarness('redact-keys', {
      scenario: { rules: [{ match: 'Pipeline: key-leak', turns: [{ text: REPORT }] }] },
      env: { GH_TOKEN: SECRET },
    });
  });
  afterAll(async () => {
    await harness?.close();
  });

  test('an agent report whose JSON keys hold a worker secret (written with \\u escapes) reaches neither history nor status --json', async () => {
    const handle = await harness.startYaml(
      'key-leak',
      'name: key-leak\ndefaults: { backend: claude-cli, model: sonnet, retries: 0, heartbeatTimeout: 30s, allowedTools: [Read] }\nstages:\n  - id: leak\n    prompt: Report.\n',
    );
    const state = await harness.finish(handle);
    expect(state.status, JSON.stringify(state.stages[0].error)).toBe('completed');
    const outputs = state.stages[0].result?.outputs as Record<string, unknown>;
    expect(outputs).toMatchObject({ '<redacted>': 'value', nested: { deep: { '<redacted>-2': 1 } }, list: [{ '<redacted>': true }] });

    const history = historyText(JSON.stringify((await handle.fetchHistory()).events));
    expect(history).toContain('<redacted>');
    expect(history).not.toContain(SECRET);

    const status = await runCli(['status', handle.workflowId, '--json'], harness.env);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(status.stdout).toContain('<redacted>');
    expect(status.stdout).not.toContain(SECRET);
  });
});
