import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { emptyHome } from './claude-cli-world.js';
import { toFolderName } from '../../src/activities/workspace/run-folder.js';
import { activitiesFor, stageInput, startAttempt } from '../helpers/stage-attempt.js';

/*
 * The output contract through each real backend: an answer that shows a command in a ```bash block before its
 * report is read right the first time, so even a stage that allows no contract retry completes.
 */

const KEY = 'sk-ant-test-contract-0123456789';
const ANSWER = [
  'I ran the tests:',
  '',
  '```bash',
  'npm test',
  '```',
  '',
  'All 12 passed.',
  '',
  '```json',
  '{"success": true, "summary": "Tests pass.", "outputs": {"tests": 12}}',
  '```',
].join('\n');

const pipeline = (backend: string): string =>
  ['name: contract', 'stages:', '  - id: check', `    backend: ${backend}`, '    model: haiku', '    contractRetries: 0', '    prompt: Run the tests.'].join('\n');

let server: ModelServer;
let root: string;

beforeAll(async () => {
  server = await startModelServer({ scenario: { rules: [{ match: 'Run the tests.', turns: [{ text: ANSWER }], repeatLastTurn: true }] }, log: () => {} });
  root = await mkdtemp(path.join(tmpdir(), 'contract-backends-'));
});
afterAll(async () => {
  await server?.close();
  await rm(root, { recursive: true, force: true });
});

describe('an answer with a ```bash block before its report completes with contractRetries: 0', () => {
  for (const backend of ['anthropic-api', 'claude-cli']) {
    it(`on the ${backend} backend`, { timeout: 120_000 }, async () => {
      const activities = activitiesFor({
        workspacesRoot: root,
        baseURL: server.url,
        apiKey: KEY,
        env: { HOME: await emptyHome(path.join(root, backend)) },
      });
      const input = stageInput(pipeline(backend), 'check', { baseDir: root, runId: `run-${backend}` });
      expect(input.stage.contractRetries).toBe(0);
      const result = await startAttempt(activities, input).result;
      expect(result).toMatchObject({ status: 'completed', summary: 'Tests pass.', outputs: { tests: 12 }, attempt: 1 });
      if (backend === 'anthropic-api') {
        // The deliverable keeps the agent's own answer, the bash block included, without the report.
        expect(await readFile(path.join(root, toFolderName(`run-${backend}`), 'outputs/check.md'), 'utf8')).toBe('I ran the tests:\n\n```bash\nnpm test\n```\n\nAll 12 passed.\n');
      }
    });
  }
});
