import { execa, type ResultPromise } from 'execa';
import { stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { createCliWorld, REPORT, waitFor, type CliWorld } from './claude-cli-world.js';

/*
 * A stage whose agent prints 200 MB must not grow the worker with it: the stream is parsed line by
 * line, long lines only as a bounded skeleton, and written to the transcript as it arrives. The
 * worker here is this test process, which runs the backend; the scripted model server runs in its
 * own process (`npm test` builds it first) so that its 200 MB are not counted.
 *
 * The bound leaves room for what Node itself costs: reading a child's stdout at full speed and
 * discarding every chunk grows RSS by 35-40 MB on this box (64 KiB read buffers awaiting GC, and
 * malloc arenas that keep freed memory), however many bytes pass. Holding one line of this
 * stream would take 230 MB.
 */

const LINE = `${'0123456789'.repeat(9)}abcdefghi\n`; // 100 bytes
const REPEAT = 2_000_000; // 200 MB of answer text
const MAX_GROWTH_BYTES = 64 * 1024 * 1024;

let world: CliWorld;
let server: ResultPromise | undefined;
let serverUrl: string;

beforeAll(async () => {
  world = await createCliWorld({ rules: [] });
  const scenarioFile = path.join(world.root, 'scenario.yaml');
  await writeFile(scenarioFile, stringify({
    rules: [
      { match: 'Task: warm up', turns: [{ text: `Ready.\n${REPORT}` }] },
      { match: 'Task: huge answer', turns: [{ text: LINE, repeat: REPEAT }] },
    ],
  }));
  server = execa('node', [path.join(PROJECT_ROOT, 'dist', 'dev', 'model-server-main.js'), '--scenario', scenarioFile], { reject: false });
  let output = '';
  server.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const match = await waitFor(() => /listening on (\S+)/.exec(output), (m) => m !== null, 'the model server to listen', 30_000);
  serverUrl = (match as RegExpExecArray)[1];
});

afterAll(async () => {
  server?.kill('SIGTERM');
  await server;
  await world?.close();
});

function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

describe('a 200 MB agent answer', () => {
  test('streams through the backend with bounded memory and lands whole in the transcript', { timeout: 240_000 }, async () => {
    const env = { ANTHROPIC_BASE_URL: serverUrl };
    // Load every module and start the orphan watchdog first, so that the baseline includes them.
    await (await world.start({ task: 'Task: warm up', env })).outcome;
    collectGarbage();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 50);
    try {
      const attempt = await world.start({ task: 'Task: huge answer', env, stage: { firstOutputTimeout: '2m', stallTimeout: '2m' } });
      const outcome = await attempt.outcome;
      peak = Math.max(peak, process.memoryUsage().rss);

      // The answer is the tail of the 200 MB text: enough for the report block at its end.
      expect(outcome.text.endsWith(LINE.repeat(3))).toBe(true);
      expect(outcome.text.length).toBeLessThanOrEqual(256 * 1024);
      expect(outcome.warnings.join('\n')).toMatch(/only the end of its text was kept/);
      // The transcript holds the assistant message and the result, each with the whole text.
      const transcriptBytes = (await stat(attempt.request.transcriptPath)).size;
      expect(transcriptBytes).toBeGreaterThan(2 * LINE.length * REPEAT);
      expect(peak - baseline).toBeLessThan(MAX_GROWTH_BYTES);
    } finally {
      clearInterval(sampler);
    }
  });
});
