import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { inject } from 'vitest';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { createHarness } from '../helpers/harness.js';
import { PipelineClient } from '../../src/library/index.js';
import { CLI, runCli } from './cli-helpers.js';
import { waitForWorkerPolling } from './worker-health.js';

/*
 * Auth modes other than an API key, and variables passed to agents with AGENT_PIPELINE_AGENT_ENV, through a real
 * worker process, the real claude binary and the scripted model server. Credentials must reach the model (or the
 * agent) and nothing else: not the workflow history, the worker's logs, our transcripts or what `status` shows.
 */

const OAUTH_TOKEN = 'sk-ant-oat01-subscription-7c41e9d2b8a5';
const GH_TOKEN = 'ghp_agentenv_5d8e1f3a9b7c2e4d';

const PIPELINE = `name: auth-check
defaults: { permissionMode: dontAsk, retries: 1, timeout: 2m, heartbeatTimeout: 1m }
stages:
  - id: env
    prompt: Show the environment.
    allowedTools: [Bash]
`;

describe('a worker with only CLAUDE_CODE_OAUTH_TOKEN and AGENT_PIPELINE_AGENT_ENV=GH_TOKEN', () => {
  let model: ModelServer;
  let scratch: string;
  let worker: ResultPromise | undefined;
  let env: NodeJS.ProcessEnv;
  let pipelineFile: string;

  beforeAll(async () => {
    // The model server accepts only the subscription token: a request without it, or with another, gets 401.
    model = await startModelServer({
      log: () => {},
      scenario: {
        requireApiKey: OAUTH_TOKEN,
        rules: [{
          name: 'env',
          match: 'Pipeline: auth-check · Stage: env ·',
          turns: [
            { text: 'Looking.', tool: { name: 'Bash', input: { command: 'env' } } },
            // The agent repeats the token it saw: the report must not carry it any further.
            { text: `\`\`\`json\n{"success": true, "summary": "GH_TOKEN is ${GH_TOKEN}", "outputs": {"token": "${GH_TOKEN}"}}\n\`\`\`` },
          ],
        }],
      },
    });
    scratch = await mkdtemp(path.join(tmpdir(), 'agent-auth-'));
    pipelineFile = path.join(scratch, 'auth.yaml');
    await writeFile(pipelineFile, PIPELINE);
    env = {
      PATH: process.env.PATH,
      HOME: scratch,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      AGENT_PIPELINE_TASK_QUEUE: `test-auth-${Math.random().toString(36).slice(2, 8)}`,
      AGENT_PIPELINE_WORKSPACES: path.join(scratch, 'workspaces'),
      AGENT_PIPELINE_HEALTH_FILE: path.join(scratch, 'worker.health'),
      AGENT_PIPELINE_LOG_LEVEL: 'DEBUG',
      ANTHROPIC_BASE_URL: model.url,
      CLAUDE_CODE_OAUTH_TOKEN: OAUTH_TOKEN,
      AGENT_PIPELINE_AGENT_ENV: 'GH_TOKEN, SSH_AUTH_SOCK',
      GH_TOKEN,
    };
    // Not execa's SIGKILL 5 s after the SIGTERM below: the log read after it must be the drained worker's whole log.
    worker = execa('node', [CLI, 'worker'], { env, extendEnv: false, reject: false, stdin: 'ignore', all: true, forceKillAfterDelay: 120_000 });
    await waitForWorkerPolling(env, 90_000, 'the worker', () => String(worker?.all ?? ''));
  });
  afterAll(async () => {
    worker?.kill('SIGTERM');
    await worker;
    await model?.close();
    await rm(scratch, { recursive: true, force: true });
  });

  test('the stage runs, the token reaches the model as a bearer token, the agent sees GH_TOKEN, and neither value is kept anywhere', async () => {
    const client = await PipelineClient.connect({ env });
    let runId: string;
    try {
      const run = await client.start(pipelineFile, { id: `auth-${Math.random().toString(36).slice(2, 8)}` });
      runId = run.id;
      const state = await run.result();
      expect(state.stages[0]).toMatchObject({ id: 'env', status: 'completed', result: { summary: 'GH_TOKEN is <redacted>', outputs: { token: '<redacted>' } } });

      // Bearer, not x-api-key: the scenario's requireApiKey proves the value matched (the record redacts it).
      const requests = model.requests().filter((r) => r.path === '/v1/messages');
      expect(requests.length).toBe(2);
      for (const request of requests) {
        expect(request.status).toBe(200);
        expect(request.headers.authorization).toBe('<redacted>');
        expect(request.headers['x-api-key']).toBeUndefined();
      }
      // The `env` tool result went back to the model: the agent's shell had GH_TOKEN.
      expect(JSON.stringify(requests[1].body)).toContain(`GH_TOKEN=${GH_TOKEN}`);

      const history = historyText(JSON.stringify((await client.temporal.workflow.getHandle(runId).fetchHistory()).events));
      expect(history).toContain('<redacted>');
      for (const secret of [OAUTH_TOKEN, GH_TOKEN]) expect(history).not.toContain(secret);

      const status = await runCli(['status', runId, '--json'], env);
      const logs = await runCli(['logs', runId, '--stage', 'env'], env);
      expect(logs.exitCode, logs.stderr).toBe(0);
      expect(logs.stdout).toContain('"summary": "GH_TOKEN is <redacted>"');
      const transcripts = await readTranscripts(path.join(scratch, 'workspaces'));
      expect(transcripts).toContain('GH_TOKEN=<redacted>');
      for (const secret of [OAUTH_TOKEN, GH_TOKEN]) {
        expect(status.stdout).not.toContain(secret);
        expect(logs.stdout).not.toContain(secret);
        expect(transcripts).not.toContain(secret);
      }
    } finally {
      await client.close();
    }
    worker!.kill('SIGTERM');
    const stopped = await worker!;
    worker = undefined;
    const workerLog = String(stopped.all);
    expect(workerLog).toContain('stage attempt ended');
    for (const secret of [OAUTH_TOKEN, GH_TOKEN]) expect(workerLog).not.toContain(secret);
  });
});

/** One auth mode: the worker's environment, the key the model server then requires, the variables the agent must see. */
interface AuthMode {
  name: string;
  env: (dir: string) => Promise<NodeJS.ProcessEnv>;
  /** The key the model server requires (x-api-key or bearer). */
  key: string;
  /** Variables the agent's shell must have, with the values that must appear nowhere else. */
  secrets: Record<string, string>;
  /** Of `secrets`, those the worker holds but its agents must not be given. */
  notPassed?: string[];
}

const MODES: AuthMode[] = [
  {
    name: 'ANTHROPIC_AUTH_TOKEN (a gateway token, sent as a bearer token)',
    key: 'gw-token-0b6d2f9e4c1a7358',
    env: async () => ({ ANTHROPIC_API_KEY: undefined, ANTHROPIC_AUTH_TOKEN: 'gw-token-0b6d2f9e4c1a7358' }),
    secrets: { ANTHROPIC_AUTH_TOKEN: 'gw-token-0b6d2f9e4c1a7358' },
  },
  {
    name: 'an apiKeyHelper in AGENT_PIPELINE_CLAUDE_SETTINGS',
    key: 'sk-ant-helper-51c9e7a3d2b8f640',
    env: async (dir) => {
      const helper = path.join(dir, 'get-key.sh');
      await writeFile(helper, '#!/bin/sh\necho sk-ant-helper-51c9e7a3d2b8f640\n', { mode: 0o755 });
      const settings = path.join(dir, 'settings.json');
      await writeFile(settings, JSON.stringify({ apiKeyHelper: helper }));
      return { ANTHROPIC_API_KEY: undefined, AGENT_PIPELINE_CLAUDE_SETTINGS: settings };
    },
    secrets: {},
  },
  {
    // No Bedrock or Vertex endpoint here: the agent authenticates with a key. The AWS credentials are the worker's
    // without Bedrock (an s3:// store may use them, issue 29): they never reach the agent, and are kept secret like
    // the key.
    name: 'Bedrock and Vertex credentials alongside an API key',
    key: 'sk-ant-api-key-3e8a1c6f9d2b4705',
    env: async () => ({
      ANTHROPIC_API_KEY: 'sk-ant-api-key-3e8a1c6f9d2b4705',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE7Q2W9R4T',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-9f3c7a1e5b2d8046',
      AWS_BEARER_TOKEN_BEDROCK: 'bedrock-bearer-4d7e2a9c1f6b3058',
      AWS_REGION: 'us-west-2',
      CLOUD_ML_REGION: 'us-east5',
      ANTHROPIC_VERTEX_PROJECT_ID: 'my-vertex-project',
    }),
    secrets: {
      ANTHROPIC_API_KEY: 'sk-ant-api-key-3e8a1c6f9d2b4705',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE7Q2W9R4T',
      AWS_SECRET_ACCESS_KEY: 'aws-secret-9f3c7a1e5b2d8046',
      AWS_BEARER_TOKEN_BEDROCK: 'bedrock-bearer-4d7e2a9c1f6b3058',
    },
    notPassed: ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_BEARER_TOKEN_BEDROCK'],
  },
];

describe.each(MODES)('a CLI stage authenticated with $name', (mode) => {
  test('runs; the agent sees its variables; their values are nowhere in the result, history or transcripts', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-auth-mode-'));
    const values = Object.values(mode.secrets);
    const harness = await createHarness('auth-mode', {
      env: { ...(await mode.env(dir)), AGENT_PIPELINE_AGENT_ENV: 'GH_TOKEN', GH_TOKEN: GH_TOKEN },
      scenario: {
        requireApiKey: mode.key,
        rules: [{
          match: 'Pipeline: auth-check · Stage: env ·',
          turns: [
            { tool: { name: 'Bash', input: { command: 'env' } } },
            { text: `\`\`\`json\n{"success": true, "summary": "saw ${[GH_TOKEN, ...values].join(' ')}", "outputs": {}}\n\`\`\`` },
          ],
        }],
      },
    });
    try {
      const handle = await harness.startYaml('auth', PIPELINE);
      const state = await harness.finish(handle);
      expect(state.stages[0], JSON.stringify(state.stages[0].error)).toMatchObject({ status: 'completed' });
      expect(state.stages[0].result?.summary).toBe(`saw ${['<redacted>', ...values.map(() => '<redacted>')].join(' ')}`);
      const requests = harness.modelServer.requests();
      expect(requests.map((r) => r.status)).toEqual([200, 200]);
      const toolResult = JSON.stringify(requests[1].body);
      for (const [name, value] of Object.entries({ ...mode.secrets, GH_TOKEN })) {
        if (mode.notPassed?.includes(name)) expect(toolResult).not.toContain(value);
        else expect(toolResult).toContain(`${name}=${value}`);
      }
      const history = historyText(JSON.stringify((await handle.fetchHistory()).events));
      const transcripts = await readTranscripts(harness.workspacesRoot);
      for (const value of [GH_TOKEN, mode.key, ...values]) {
        expect(history).not.toContain(value);
        expect(transcripts).not.toContain(value);
      }
    } finally {
      await harness.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** The history as JSON with every payload decoded (payload data is base64 on the wire, so a raw search would miss it). */
function historyText(json: string): string {
  const decoded = [...json.matchAll(/"data":"([A-Za-z0-9+/=]+)"/g)].map((m) => Buffer.from(m[1], 'base64').toString('utf8'));
  return `${json}\n${decoded.join('\n')}`;
}

/** Our own per-attempt transcripts (attempt-N.jsonl) of every run under `root`. */
async function readTranscripts(root: string): Promise<string> {
  const files = (await readdir(root, { recursive: true })).filter((f) => /attempt-\d+\.jsonl$/.test(f));
  expect(files.length).toBeGreaterThan(0);
  return (await Promise.all(files.map((f) => readFile(path.join(root, f), 'utf8')))).join('\n');
}

describe('inline settings JSON in AGENT_PIPELINE_CLAUDE_SETTINGS', () => {
  test('reaches the agent as a 0600 settings file, never on its command line, and the helper in it still authenticates', async () => {
    // Issue 19: main passed the JSON itself with `--settings`, where `ps` shows it to every user of the host.
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-auth-inline-'));
    const key = 'sk-ant-inline-helper-8e2d4c6a0f1b';
    const helper = path.join(dir, 'inline-helper.sh');
    await writeFile(helper, `#!/bin/sh\necho ${key}\n`, { mode: 0o755 });
    // Unsandboxed, so the agent's Bash can read its ancestors' command lines: the agent's and the worker's.
    const ancestors = 'p=$$; while [ "$p" -gt 1 ]; do printf "%s\\n" "$(tr "\\0" " " < /proc/$p/cmdline)"; p=$(awk "{print \\$4}" /proc/$p/stat); done';
    const harness = await createHarness('auth-inline', {
      env: { ANTHROPIC_API_KEY: undefined, AGENT_PIPELINE_CLAUDE_SETTINGS: JSON.stringify({ apiKeyHelper: helper }), AGENT_PIPELINE_SANDBOX: 'off' },
      scenario: {
        requireApiKey: key,
        rules: [{ match: 'Pipeline: auth-check · Stage: env ·', turns: [{ tool: { name: 'Bash', input: { command: ancestors } } }, { text: '```json\n{"success": true, "summary": "ok", "outputs": {}}\n```' }] }],
      },
    });
    try {
      const state = await harness.finish(await harness.startYaml('auth', PIPELINE));
      expect(state.stages[0], JSON.stringify(state.stages[0].error)).toMatchObject({ status: 'completed' });
      const requests = harness.modelServer.requests();
      expect(requests.map((r) => r.status)).toEqual([200, 200]);
      const commandLines = JSON.stringify((requests[1].body as { messages: unknown[] }).messages.at(-1));
      const settingsFile = /--settings=(\S+settings\.json)/.exec(commandLines)?.[1];
      expect(settingsFile, commandLines).toBeDefined();
      expect(commandLines).not.toContain('apiKeyHelper');
      expect(commandLines).not.toContain('inline-helper.sh');
      expect((await stat(settingsFile!)).mode & 0o777).toBe(0o600);
      expect(JSON.parse(await readFile(settingsFile!, 'utf8'))).toMatchObject({ apiKeyHelper: helper });
    } finally {
      await harness.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
