import { Client, Connection } from '@temporalio/client';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startDevServer, type DevServer } from '../../src/dev/dev-server.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { loadPipelineFile, resolveInputs } from '../../src/library/load-pipeline.js';
import { startRun } from '../../src/library/runs.js';
import { getStatusQuery } from '../../src/contracts/messages.js';
import { startWorkerProcess, waitForRequest, type WorkerProcess } from './fault-helpers.js';
import { expectNoStageLeftRunning } from './workflow-helpers.js';

/* The Temporal server stops and starts again (same port, same SQLite file) while a stage runs. */

const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

describe('a Temporal server restart in the middle of a run', () => {
  let dir: string;
  let server: DevServer | undefined;
  let model: ModelServer;
  let worker: WorkerProcess | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-fault-server-'));
    model = await startModelServer({
      log: () => {},
      scenario: {
        rules: [
          { name: 'prepare', match: 'Stage: prepare ·', turns: [{ text: report('Prepared.') }] },
          // Streams for about six seconds: the server goes away in the middle of it.
          { name: 'build', match: 'Stage: build ·', turns: [{ text: `${'Building. '.repeat(30)}\n${report('Built.')}`, chunks: 30, chunkDelayMs: 200 }] },
          { name: 'ship', match: 'Stage: ship ·', turns: [{ text: report('Shipped.') }] },
        ],
      },
    });
  });
  afterAll(async () => {
    await worker?.crash();
    await server?.stop();
    await model?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('the run completes after the server comes back', async () => {
    const dbFile = path.join(dir, 'temporal.db');
    server = await startDevServer({ port: 'auto', headless: true, dbFile, logFile: path.join(dir, 'server.log') });
    const port = Number(server.address.split(':')[1]);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      AGENT_PIPELINE_TASK_QUEUE: 'fault-server',
      AGENT_PIPELINE_WORKSPACES: path.join(dir, 'workspaces'),
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: 'sk-test-fault-server',
      // Its run is started without a bundle: the worker reads the pipeline from this folder.
      AGENT_PIPELINE_PIPELINE_DIRS: dir,
    };
    worker = startWorkerProcess(env);
    const file = path.join(dir, 'restart.yaml');
    await writeFile(
      file,
      ['name: restart', 'defaults: { backend: claude-cli, model: sonnet, retries: 3, heartbeatTimeout: 10s }', 'stages:']
        .concat(['prepare', 'build', 'ship'].map((id, i) => `  - id: ${id}\n    prompt: Do ${id}.${i > 0 ? `\n    needs: [${['prepare', 'build'][i - 1]}]` : ''}`))
        .join('\n'),
    );
    const { pipeline, baseDir } = await loadPipelineFile(file);
    let connection = await Connection.connect({ address: server.address });
    const { handle } = await startRun(new Client({ connection }), { pipeline, baseDir, pipelineFile: file, inputs: resolveInputs(pipeline, file, {}) }, { taskQueue: 'fault-server', id: 'restart-run' });
    await waitForRequest(model, (r) => r.rule === 'build', 90_000);
    await connection.close();

    await server.stop();
    server = await startDevServer({ port, headless: true, dbFile, logFile: path.join(dir, 'server.log') });

    connection = await Connection.connect({ address: server.address });
    const client = new Client({ connection });
    const reopened = client.workflow.getHandle(handle.workflowId);
    await reopened.result();
    const state = await reopened.query(getStatusQuery);
    await connection.close();
    expectNoStageLeftRunning(state);
    expect(state.stages.map((s) => s.status)).toEqual(['completed', 'completed', 'completed']);
  });
});
