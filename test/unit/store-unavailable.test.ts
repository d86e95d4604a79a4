import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ExitingAgents } from '../../src/activities/backends/claude-cli/agent-exits.js';
import { DEFAULT_MODELS } from '../../src/activities/backends/models.js';
import { createActivities } from '../../src/activities/index.js';
import { SecretRegistry } from '../../src/activities/secrets.js';
import { openStore } from '../../src/store/open-store.js';
import { failureOf, stageInput, startAttempt } from '../helpers/stage-attempt.js';

/*
 * An attempt whose store cannot be reached (the real S3 client against a port nobody listens on) fails retryable with
 * STORE_UNAVAILABLE, naming the setting to check, and the store's secret nowhere in it.
 */

const SECRET = 'store-secret-that-must-not-leak-7f3a';

describe('STORE_UNAVAILABLE', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'store-unavailable-'));
  });
  afterAll(async () => rm(root, { recursive: true, force: true }));

  test('an attempt that cannot reach the store fails retryable as STORE_UNAVAILABLE, naming AGENT_PIPELINE_STORE_ENDPOINT', { timeout: 60_000 }, async () => {
    const env = {
      AGENT_PIPELINE_STORE: 's3://runs',
      AGENT_PIPELINE_STORE_ENDPOINT: 'http://127.0.0.1:9',
      AGENT_PIPELINE_STORE_PATH_STYLE: '1',
      AGENT_PIPELINE_STORE_ACCESS_KEY_ID: 'store-access-id',
      AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: SECRET,
    };
    const store = openStore(env, { defaultDir: root });
    const activities = createActivities({
      workspacesRoot: path.join(root, 'workspaces'),
      allowedPaths: 'any',
      pipelineDirs: 'any',
      secrets: new SecretRegistry(),
      store,
      // A backend that reads a checkpoint before it starts, as a restoring attempt does.
      extraBackends: {
        checkpointing: async () => {
          await store.get('runs/abc/checkpoint.json', 1024);
          throw new Error('unreachable: the store answered');
        },
      },
      cli: { env: { ...process.env, ...env }, exitingAgents: new ExitingAgents() },
      api: { models: DEFAULT_MODELS },
    });
    const yaml = 'name: p\nstages:\n  - id: a\n    prompt: Do it.\n';
    const input = stageInput(yaml, 'a', { baseDir: root, runId: 'store-unavailable-1' });
    const failure = await failureOf(startAttempt(activities, { ...input, stage: { ...input.stage, backend: 'checkpointing' } }).result);
    expect(failure.type).toBe('STORE_UNAVAILABLE');
    expect(failure.nonRetryable).toBe(false);
    expect(failure.message).toContain('AGENT_PIPELINE_STORE_ENDPOINT');
    expect(JSON.stringify({ message: failure.message, details: failure.details })).not.toContain(SECRET);
  });
});
