import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Frame, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { loadPipelineFile, resolveInputs } from '../../src/library/load-pipeline.js';
import { startRun } from '../../src/library/runs.js';
import { startDevServer, type DevServer } from '../../src/dev/dev-server.js';
import { startModelServer, type ModelServer } from '../../src/dev/model-server.js';
import { createPipelineWorker } from '../../src/worker/create-worker.js';
import { TEST_SANDBOX_MODE } from '../helpers/sandbox-host.js';
import { approveStageUpdate, getStatusQuery } from '../../src/contracts/messages.js';
import { WORKFLOW_BUNDLE } from '../helpers/project-paths.js';
import { stopTestWorker } from '../helpers/teardown.js';
import { CHROMIUM as CHROMIUM_PACKAGE, hasSystemPackage } from '../helpers/system-package.js';
import { expectNoStageLeftRunning, waitForWaiting } from './workflow-helpers.js';

/*
 * What a person sees in the Temporal Web UI, checked in a real browser: the run's summary (set by the client),
 * its current details (the stage table and what it waits for) and the activity summaries.
 * Needs Debian's Chromium at /usr/bin/chromium (`apt-get install -y chromium`): skipped with a note without it, except
 * in CI, which installs it.
 */

const CHROMIUM = CHROMIUM_PACKAGE.file!;
const SCREENSHOT = path.join(tmpdir(), 'agent-pipeline-webui.png');
const TASK_QUEUE = 'webui';
const report = (summary: string): string => `\`\`\`json\n${JSON.stringify({ success: true, summary, outputs: {} })}\n\`\`\``;

describe.skipIf(!hasSystemPackage(CHROMIUM_PACKAGE))('the Temporal Web UI', () => {
  let dir: string;
  let server: DevServer;
  let model: ModelServer;
  let worker: Worker;
  let running: Promise<void>;
  let connection: Connection;
  let browser: Browser | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-webui-'));
    server = await startDevServer({ port: 'auto', dbFile: null, logFile: path.join(dir, 'server.log') });
    model = await startModelServer({
      log: () => {},
      scenario: { rules: [{ match: 'Stage: draft ·', turns: [{ text: report('Drafted the release notes.') }] }] },
    });
    const env = {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      AGENT_PIPELINE_TASK_QUEUE: TASK_QUEUE,
      AGENT_PIPELINE_WORKSPACES: path.join(dir, 'workspaces'),
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: 'sk-test-webui',
      AGENT_PIPELINE_SANDBOX: TEST_SANDBOX_MODE,
      // Its run is started without a bundle: the worker reads the pipeline from this folder.
      AGENT_PIPELINE_PIPELINE_DIRS: dir,
    };
    worker = await createPipelineWorker({ env, taskQueue: TASK_QUEUE, workflowBundlePath: WORKFLOW_BUNDLE });
    running = worker.run();
    connection = await Connection.connect({ address: server.address });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await connection?.close();
    await stopTestWorker('the Web UI test worker', worker, running);
    await model?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function startWaitingRun(): Promise<WorkflowHandle> {
    const file = path.join(dir, 'notes.yaml');
    await writeFile(
      file,
      [
        'name: release-notes',
        'description: Draft release notes and have a person approve them',
        'inputs: { version: { default: "2.1.0" } }',
        'defaults: { backend: anthropic-api, model: haiku, retries: 0, maxTokens: 500 }',
        'stages:',
        '  - id: draft',
        '    prompt: Draft the notes for {{inputs.version}}.',
        '    approval: { message: Publish these release notes? }',
      ].join('\n'),
    );
    const { pipeline, baseDir } = await loadPipelineFile(file);
    const { handle } = await startRun(
      new Client({ connection }),
      { pipeline, baseDir, pipelineFile: file, inputs: resolveInputs(pipeline, file, {}) },
      { taskQueue: TASK_QUEUE, id: `webui-${Date.now()}` },
    );
    await waitForWaiting(handle, 'draft', 'approval');
    return handle;
  }

  test("a run's page shows its summary, its current details with what it waits for, and the activity summaries", async () => {
    const handle = await startWaitingRun();
    const page = await browser!.newPage({ viewport: { width: 1400, height: 1200 } });
    await page.goto(`${server.uiUrl}/namespaces/default/workflows/${handle.workflowId}`);
    // Summary and details live on the "User Metadata" tab; the UI renders each markdown text in its own frame.
    await page.getByText('User Metadata', { exact: true }).first().click();
    await frameShowing(page, 'release-notes (version=2.1.0)');
    await frameShowing(page, 'Draft release notes and have a person approve them');
    await frameShowing(page, ['Publish these release notes?', `agent-pipeline approve ${handle.workflowId} --stage draft`, 'waiting (approval)']);
    await page.getByText('stage draft · anthropic-api · haiku').first().waitFor({ timeout: 10_000 });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    await handle.executeUpdate(approveStageUpdate, { args: [{ stage: 'draft' }] });
    await handle.result();
    expectNoStageLeftRunning(await handle.query(getStatusQuery));
    await page.close();
  });
});

/**
 * The frame (the UI renders summary and details markdown in frames) that shows every one of `texts`. Frames are
 * looked up afresh on each try: the UI re-creates them as it refreshes the page, which a loaded machine makes
 * likely between finding a frame and reading it.
 */
async function frameShowing(page: Page, texts: string | string[], timeoutMs = 30_000): Promise<Frame> {
  const wanted = typeof texts === 'string' ? [texts] : texts;
  const shows = async (frame: Frame, text: string): Promise<boolean> => (await frame.getByText(text).count().catch(() => 0)) > 0;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      if ((await Promise.all(wanted.map((text) => shows(frame, text)))).every(Boolean)) return frame;
    }
    await page.waitForTimeout(250);
  }
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  throw new Error(`no frame of ${page.url()} shows all of ${JSON.stringify(wanted)} within ${timeoutMs} ms; the page is in ${SCREENSHOT}`);
}
