import { describe, expect, test } from 'vitest';
import { extraAgentVariables } from '../../src/activities/backends/claude-cli/agent-auth.js';
import { agentEnvironment } from '../../src/activities/backends/claude-cli/args.js';
import { ExitingAgents } from '../../src/activities/backends/claude-cli/agent-exits.js';
import { loadModelCatalog } from '../../src/activities/backends/models.js';
import { createActivities } from '../../src/activities/index.js';
import { REDACTED, SecretRegistry } from '../../src/activities/secrets.js';
import { canonicalJson } from '../../src/trust/canonical-json.js';
import { generateEncryptionKey, generateSigningKey, parsePublicKeys, parseSigningKey, publicKeyLine } from '../../src/trust/keys.js';
import { findDecisionSignatureProblem, findRunSignatureProblem, hasScheduleSignature } from '../../src/trust/signatures.js';
import { RunSigner, signerFrom } from '../../src/trust/signer.js';
import { workerTrustFromEnv } from '../../src/trust/worker-trust.js';

const INPUT = { version: 1, pipeline: { name: 'p', stages: [{ id: 'a', prompt: 'x' }] }, baseDir: '/p', pipelineFile: 'p.yaml', inputs: { b: '2', a: '1' } };

describe('keys', () => {
  test('a generated signing key reads back, and its public line is the one printed', () => {
    const { privateLine, publicLine } = generateSigningKey('team-1');
    const key = parseSigningKey(privateLine);
    expect(key.keyId).toBe('team-1');
    expect(publicKeyLine(key)).toBe(publicLine);
    expect([...parsePublicKeys(`${publicLine}, ${generateSigningKey('team-2').publicLine}`, 'V').keys()]).toEqual(['team-1', 'team-2']);
  });

  test('an encryption key is a key id and 32 bytes of base64', () => {
    const { line } = generateEncryptionKey('enc-1');
    const [id, data] = line.split(':');
    expect(id).toBe('enc-1');
    expect(Buffer.from(data, 'base64')).toHaveLength(32);
  });

  test('a bad key names the variable and the fix, and never quotes the value back', () => {
    const secret = 'sign-1:not-a-key-but-maybe-secret';
    expect(() => parseSigningKey(secret)).toThrow(/AGENT_PIPELINE_SIGNING_KEY: a signing key is written <keyId>:<base64>.*keys generate/);
    expect(() => parseSigningKey(secret)).not.toThrow(/maybe-secret/);
    const publicOnly = generateSigningKey('x').publicLine;
    expect(() => parseSigningKey(publicOnly)).toThrow(/key x is not an Ed25519 private key/);
    expect(() => parsePublicKeys('a:AAAA,a:AAAA', 'AGENT_PIPELINE_TRUSTED_KEYS')).toThrow(/AGENT_PIPELINE_TRUSTED_KEYS/);
    expect(() => workerTrustFromEnv({ AGENT_PIPELINE_ALLOW_WORKER_FILES: 'yes' })).toThrow(/AGENT_PIPELINE_ALLOW_WORKER_FILES=yes/);
  });

  test('decision keys default to the trusted keys; worker files are allowed only without trusted keys or with the setting', () => {
    const { publicLine } = generateSigningKey('k');
    const other = generateSigningKey('d').publicLine;
    expect([...workerTrustFromEnv({ AGENT_PIPELINE_TRUSTED_KEYS: publicLine }).decisionKeys.keys()]).toEqual(['k']);
    expect([...workerTrustFromEnv({ AGENT_PIPELINE_TRUSTED_KEYS: publicLine, AGENT_PIPELINE_DECISION_KEYS: other }).decisionKeys.keys()]).toEqual(['d']);
    expect(workerTrustFromEnv({}).allowWorkerFiles).toBe(true);
    expect(workerTrustFromEnv({ AGENT_PIPELINE_TRUSTED_KEYS: publicLine }).allowWorkerFiles).toBe(false);
    expect(workerTrustFromEnv({ AGENT_PIPELINE_TRUSTED_KEYS: publicLine, AGENT_PIPELINE_ALLOW_WORKER_FILES: '1' }).allowWorkerFiles).toBe(true);
  });
});

describe('signatures', () => {
  const pair = generateSigningKey('k');
  const keys = parsePublicKeys(pair.publicLine, 'AGENT_PIPELINE_TRUSTED_KEYS');
  const signer = new RunSigner(parseSigningKey(pair.privateLine));

  test('canonical JSON ignores key order and undefined fields, as a payload round trip does', () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [1, 'x'] } })).toBe('{"a":{"c":[1,"x"]},"b":1}');
  });

  test('a signed run input verifies for its workflow id after a JSON round trip, and for no other id or input', () => {
    const signed = JSON.parse(JSON.stringify(signer.signRun(INPUT, 'run-1'))) as typeof INPUT;
    const run = (workflowId: string) => ({ workflowId });
    expect(findRunSignatureProblem(signed, run('run-1'), keys, 'V', Date.now())).toBeUndefined();
    expect(findRunSignatureProblem(signed, run('run-2'), keys, 'V', Date.now())).toMatch(/does not match/);
    expect(findRunSignatureProblem({ ...signed, inputs: { a: '1' } }, run('run-1'), keys, 'V', Date.now())).toMatch(/does not match/);
    expect(findRunSignatureProblem(signed, run('run-1'), keys, 'V', Date.now() + 2 * 3600_000)).toMatch(/expired/);
    expect(findRunSignatureProblem(INPUT, run('run-1'), keys, 'V', Date.now())).toMatch(/not signed/);
  });

  test('a schedule\'s signature holds for runs of that schedule as created then, never for a workflow id or the same id created again', () => {
    const nightly = { scheduleId: 'nightly', createdAt: 1_790_000_000_123 };
    const signed = signer.signSchedule(INPUT, nightly);
    expect(hasScheduleSignature(signed)).toBe(true);
    expect(findRunSignatureProblem(signed, { schedule: nightly }, keys, 'V', Date.now())).toBeUndefined();
    expect(findRunSignatureProblem(signed, { workflowId: 'nightly-2026-11-26T03:00:00Z' }, keys, 'V', Date.now())).toMatch(/not started by that schedule/);
    expect(findRunSignatureProblem(signed, { schedule: { ...nightly, scheduleId: 'other' } }, keys, 'V', Date.now())).toMatch(/does not match/);
    // Deleted and created again under its id by someone who copied the action: another schedule.
    expect(findRunSignatureProblem(signed, { schedule: { ...nightly, createdAt: nightly.createdAt + 60_000 } }, keys, 'V', Date.now())).toMatch(/created again/);
  });

  test('a decision verifies for its run and its arguments only; a garbled signature is refused, not thrown', () => {
    const args = signer.signDecision('run-1', 'approveStage', { stage: 'gate', allowAll: true });
    expect(findDecisionSignatureProblem('run-1', 'approveStage', args, keys, Date.now())).toBeUndefined();
    expect(findDecisionSignatureProblem('run-2', 'approveStage', args, keys, Date.now())).toMatch(/does not match/);
    expect(findDecisionSignatureProblem('run-1', 'rejectStage', args, keys, Date.now())).toMatch(/does not match/);
    expect(findDecisionSignatureProblem('run-1', 'approveStage', { ...args, allowAll: undefined, budgetUsd: 1000 }, keys, Date.now())).toMatch(/does not match/);
    expect(findDecisionSignatureProblem('run-1', 'approveStage', { ...args, signature: { ...args.signature, value: 'xx' } }, keys, Date.now())).toMatch(/does not match/);
  });

  test('the client signs with connect({ signingKey }) over AGENT_PIPELINE_SIGNING_KEY, and not at all with neither', () => {
    const other = generateSigningKey('env-key');
    expect(signerFrom(pair.privateLine, { AGENT_PIPELINE_SIGNING_KEY: other.privateLine })?.keyId).toBe('k');
    expect(signerFrom(undefined, { AGENT_PIPELINE_SIGNING_KEY: other.privateLine })?.keyId).toBe('env-key');
    expect(signerFrom(undefined, {})).toBeUndefined();
  });
});

describe('keys stay out of agents and reports', () => {
  const signing = generateSigningKey('k').privateLine;
  const encryption = generateEncryptionKey('e').line;

  test('an agent never gets the signing or encryption key, even when AGENT_PIPELINE_AGENT_ENV names them', () => {
    const env = { PATH: '/bin', AGENT_PIPELINE_SIGNING_KEY: signing, AGENT_PIPELINE_ENCRYPTION_KEY: encryption, AGENT_PIPELINE_AGENT_ENV: 'AGENT_PIPELINE_SIGNING_KEY,AGENT_PIPELINE_ENCRYPTION_KEY,GH_TOKEN' };
    expect(extraAgentVariables(env)).toEqual(['GH_TOKEN']);
    const agent = agentEnvironment(env, '/cfg', { stage: 's', worker: 'w' });
    expect(JSON.stringify(agent)).not.toContain(signing.split(':')[1]);
    expect(JSON.stringify(agent)).not.toContain(encryption.split(':')[1]);
  });

  test('a worker registers both keys for redaction, whole and each key\'s base64 alone', () => {
    const secrets = new SecretRegistry();
    const env = { AGENT_PIPELINE_SIGNING_KEY: signing, AGENT_PIPELINE_ENCRYPTION_KEY: `${encryption},old:${Buffer.alloc(32, 7).toString('base64')}` };
    createActivities({ workspacesRoot: '/nonexistent', allowedPaths: [], secrets, cli: { env, exitingAgents: new ExitingAgents() }, api: { models: loadModelCatalog({}) } });
    const leaked = `${signing.split(':')[1]} ${encryption} ${Buffer.alloc(32, 7).toString('base64')}`;
    expect(secrets.redact(leaked)).toBe(`${REDACTED} ${REDACTED} ${REDACTED}`);
  });
});
