import { afterEach, describe, expect, test, vi } from 'vitest';
import { workerSecretValues } from '../../src/activities/backends/claude-cli/agent-auth.js';
import type { CliProcessResult } from '../../src/activities/backends/claude-cli/agent-process-options.js';
import { attemptWarn, followToExit } from '../../src/activities/backends/claude-cli/attempt-outcome.js';
import { ExitingAgents } from '../../src/activities/backends/claude-cli/agent-exits.js';
import { loadModelCatalog } from '../../src/activities/backends/models.js';
import { createActivities } from '../../src/activities/index.js';
import { currentSecretValues, REDACTED, SecretRegistry } from '../../src/activities/secrets.js';

/*
 * Issue 19, reproduction 5: secrets that slipped past redaction on main.
 */

const SECRET = 'ghp_worker-token-7c1e9a44';

/** `{ a: { a: … { a: leaf } } }`, `depth` levels deep. */
function nested(depth: number, leaf: unknown): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = { a: [value] };
  return value;
}

describe('redaction', () => {
  test('reaches a secret nested at any depth in what an agent reports', () => {
    const secrets = new SecretRegistry([SECRET]);
    // Main stopped at 20 levels: an agent's `outputs` nested deeper kept the secret.
    for (const depth of [25, 500]) {
      const redacted = JSON.stringify(secrets.redact(nested(depth, `token ${SECRET}`)));
      expect(redacted).not.toContain(SECRET);
      expect(redacted).toContain(REDACTED);
    }
  });

  test('leaves a cyclic value alone where it cycles instead of looping', () => {
    const secrets = new SecretRegistry([SECRET]);
    const value: Record<string, unknown> = { text: SECRET };
    value.self = value;
    const redacted = secrets.redact(value);
    expect(redacted.text).toBe(REDACTED);
    expect(redacted.self).toBe(value);
  });
});

describe('the secrets a worker registers', () => {
  test('are every credential it holds, whatever its agents are given', () => {
    const env = {
      PATH: '/usr/bin',
      ANTHROPIC_API_KEY: 'sk-ant-api-key-0001',
      GH_TOKEN: SECRET,
      TEMPORAL_API_KEY: 'temporal-cloud-key-0002',
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20otel-bearer-0003,x-team=platform-team',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'api-key=honeycomb-key-0004',
      NPM_TOKEN: 'npm-token-value-0005',
      DATABASE_PASSWORD: 'db-password-0006',
      AGENT_PIPELINE_ENCRYPTION_KEY: `new:${'A'.repeat(43)}=,old:${'B'.repeat(43)}=`,
      AGENT_PIPELINE_TASK_QUEUE: 'agent-pipeline',
    };
    // None of these is passed to agents (no AGENT_PIPELINE_AGENT_ENV): main registered only the agents' own keys.
    const values = workerSecretValues(env);
    const encryptionKeys = [`${'A'.repeat(43)}=`, `${'B'.repeat(43)}=`];
    for (const secret of ['sk-ant-api-key-0001', SECRET, 'temporal-cloud-key-0002', 'otel-bearer-0003', 'honeycomb-key-0004', 'npm-token-value-0005', 'db-password-0006', ...encryptionKeys]) {
      expect(values).toContain(secret);
    }
    expect(values).not.toContain('/usr/bin');
    expect(values).not.toContain('agent-pipeline');
    const secrets = new SecretRegistry(values);
    expect(secrets.redact('Authorization: Bearer otel-bearer-0003')).not.toContain('otel-bearer-0003');
  });
});

describe('a worker built with createActivities', () => {
  test('registers GH_TOKEN, TEMPORAL_API_KEY and OpenTelemetry headers though no agent is given them', () => {
    const secrets = new SecretRegistry();
    const env = { GH_TOKEN: SECRET, TEMPORAL_API_KEY: 'temporal-cloud-key-0002', OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer otel-bearer-0003' };
    createActivities({ workspacesRoot: '/nonexistent', allowedPaths: [], secrets, cli: { env, exitingAgents: new ExitingAgents() }, api: { models: loadModelCatalog({}) } });
    // Main registered these only when AGENT_PIPELINE_AGENT_ENV named them.
    expect(secrets.redact(`${SECRET} temporal-cloud-key-0002 otel-bearer-0003`)).toBe(`${REDACTED} ${REDACTED} ${REDACTED}`);
  });
});

describe('an agent followed to its exit after its result', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  test('has its last stderr line redacted before it is logged, after its activity completed', async () => {
    const written: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
    const secrets = new SecretRegistry([SECRET]);
    // The warning function is taken while the activity runs; the agent exits after the activity completed.
    const warn = secrets.run(() => attemptWarn());
    const exit = Promise.resolve({ exitCode: 1, stderrTail: `fatal: could not push with ${SECRET}\n` } as CliProcessResult);
    await followToExit('deliver', exit, warn);
    expect(written.join('')).toContain('exited with code 1');
    expect(written.join('')).toContain(REDACTED);
    expect(written.join('')).not.toContain(SECRET);
  });

  test('the transcript writer gets every secret the activity\'s registry holds, not only the environment\'s', () => {
    // The API client's key, given as an option, is in no environment variable the transcript used to scan.
    const registry = new SecretRegistry([SECRET, 'sk-ant-client-option-key-0001']);
    expect(currentSecretValues()).toBeUndefined();
    expect(registry.run(() => currentSecretValues())).toEqual([SECRET, 'sk-ant-client-option-key-0001']);
  });
});


describe('redaction of keys and escaped text (issue 33, item 13)', () => {
  const escaped = (text: string): string => [...text].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

  test('redacts object keys at any depth, keeping keys that redact alike apart', () => {
    const secrets = new SecretRegistry([SECRET]);
    const parsed = JSON.parse(`{"${escaped(SECRET)}": 1, "a": {"b": [{"x-${escaped(SECRET)}": "v"}]}, "<redacted>": 0, "pre ${SECRET}": 2}`) as Record<string, unknown>;
    // Main redacted values only: the parsed keys held the secret as it is.
    const redacted = secrets.redact(parsed);
    expect(JSON.stringify(redacted)).not.toContain(SECRET);
    expect(redacted).toEqual({ '<redacted> (2)': 1, a: { b: [{ 'x-<redacted>': 'v' }] }, '<redacted>': 0, 'pre <redacted>': 2 });
  });

  test('redacts a secret spelled with JSON escapes in text, also quoted twice, and leaves other escapes alone', () => {
    const secrets = new SecretRegistry([SECRET]);
    expect(secrets.redact(`{"${escaped(SECRET)}": 1}`)).toBe('{"<redacted>": 1}');
    expect(secrets.redact(`say \\"${SECRET.slice(0, 3)}\\u${SECRET.charCodeAt(3).toString(16).padStart(4, '0')}${SECRET.slice(4)}\\"`)).toBe('say "<redacted>"');
    const twice = JSON.stringify(JSON.stringify({ [SECRET]: 1 }).replace(SECRET[0], escaped(SECRET[0])));
    expect(secrets.redact(twice)).not.toContain(SECRET);
    expect(secrets.redact(twice)).toContain(REDACTED);
    expect(secrets.redact('a \\n b \\u0041')).toBe('a \\n b \\u0041');
  });
});
