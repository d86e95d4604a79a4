import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.js';
import { MISSING_SANDBOX_PACKAGES } from '../helpers/sandbox-host.js';
import { emptyHome } from './claude-cli-world.js';
import { stageOf } from './workflow-helpers.js';

/*
 * Issue 29: the store's credentials and the store itself are the worker's, never an agent's. With the real `claude`,
 * the real sandbox and the scripted model, an agent on a worker whose store is an `s3://`-style set of keys and a
 * `file://` folder of its own runs `env` and tries to read an object of the store: it sees no store setting, no AWS
 * variable (Bedrock is off, so they are not its credentials), and reads nothing of the store, even when
 * AGENT_PIPELINE_AGENT_ENV names the store's secret.
 */

const missing = MISSING_SANDBOX_PACKAGES;

const AWS_SECRET = 'AWS-SECRET-9c2e7a41f0';
const AWS_ID = 'AKIAWORKERONLY7d3b';
const STORE_SECRET = 'STORE-SECRET-1f8d0b6c52';
const STORE_ID = 'STORE-ACCESS-ID-4a7e93';
const STORED = 'STORED-CHECKPOINT-6b0d2f';
const REPORT = '```json\n{"success": true, "summary": "Looked.", "outputs": {}}\n```';

let harness: Harness;
let scratch: string;
let storeObject: string;

/** `cat` of a path the shell builds at run time: no permission rule can match the command, only the sandbox stops it. */
const catAtRunTime = (file: string): string => `f=$(printf '%s' '${file.slice(0, 1)}' '${file.slice(1)}'); cat "$f" || echo "unread: $f"`;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'store-reach-'));
  const home = await emptyHome(scratch);
  const store = path.join(scratch, 'store');
  storeObject = path.join(store, 'runs', 'abc', 'checkpoint.json');
  await mkdir(path.dirname(storeObject), { recursive: true });
  await writeFile(storeObject, `${STORED}\n`);
  harness = await createHarness('store-reach', {
    scenario: {
      rules: [
        {
          match: 'Pipeline: store-reach',
          turns: [
            { tool: { name: 'Bash', input: { command: `env | sort; ${catAtRunTime(storeObject)}` } } },
            { tool: { name: 'Read', input: { file_path: storeObject } } },
            { text: REPORT },
          ],
        },
      ],
    },
    env: {
      HOME: home,
      AGENT_PIPELINE_STORE: `file://${store}`,
      AGENT_PIPELINE_STORE_ACCESS_KEY_ID: STORE_ID,
      AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY: STORE_SECRET,
      AWS_ACCESS_KEY_ID: AWS_ID,
      AWS_SECRET_ACCESS_KEY: AWS_SECRET,
      AWS_REGION: 'eu-west-1',
      AGENT_PIPELINE_AGENT_ENV: 'AGENT_PIPELINE_STORE_SECRET_ACCESS_KEY,AGENT_PIPELINE_STORE',
    },
  });
});
afterAll(async () => {
  await harness?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe("the store is out of an agent's reach", () => {
  test.skipIf(missing.length > 0)(
    'an agent without Bedrock sees no AWS variable and no store setting in its environment, and reads no object of a file:// store',
    { timeout: 180_000 },
    async () => {
      const yaml =
        'name: store-reach\ndefaults: { backend: claude-cli, model: sonnet, heartbeatTimeout: 30s, retries: 0 }\n' +
        'stages:\n  - id: look\n    prompt: Look around.\n    allowedTools: [Bash, Read]\n    sandbox: true\n';
      const state = await harness.finish(await harness.startYaml('store-reach', yaml));
      expect(state.status, JSON.stringify(stageOf(state, 'look'))).toBe('completed');
      const last = harness.modelServer.requests().at(-1);
      const results = JSON.stringify(last?.body);
      // The agent ran `env`: its PATH is there, so the output is.
      expect(results).toContain('CLAUDE_CONFIG_DIR=');
      expect(results).toContain(`unread: ${storeObject}`);
      expect(results).not.toMatch(/AWS_[A-Z_]+=/);
      expect(results).not.toMatch(/AGENT_PIPELINE_STORE[A-Z_]*=/);
      const everything = JSON.stringify(harness.modelServer.requests().map((r) => r.body));
      for (const secret of [AWS_SECRET, AWS_ID, STORE_SECRET, STORE_ID, STORED]) expect(everything).not.toContain(secret);
    },
  );
});
