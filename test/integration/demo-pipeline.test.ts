import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';

const DEMO = path.join(PROJECT_ROOT, 'examples', 'demo');

describe('the demo pipeline, through the real claude binary and a real dev server', () => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await createHarness('demo', { scenario: path.join(DEMO, 'scenario.yaml') });
  });
  afterAll(() => harness?.close());

  it('runs every stage and leaves the artifacts the agents wrote', async () => {
    const state = await harness.finish(await harness.start(path.join(DEMO, 'pipeline.yaml')));

    expect(state.status).toBe('completed');
    expect(state.stages.map((s) => [s.id, s.status])).toEqual([
      ['spec', 'completed'],
      ['implement', 'completed'],
      ['review', 'completed'],
      ['release-notes', 'completed'],
    ]);
    const workspace = state.workspace!;
    expect(workspace.startsWith(harness.workspacesRoot)).toBe(true);
    await expect(readFile(path.join(workspace, 'docs/spec.md'), 'utf8')).resolves.toContain('# Greeter');
    await expect(readFile(path.join(workspace, 'src/greet.js'), 'utf8')).resolves.toContain('export function greet');
    await expect(readFile(path.join(workspace, 'outputs/release-notes.md'), 'utf8')).resolves.toContain('greets NAME');

    const implement = state.stages.find((s) => s.id === 'implement')!.result!;
    expect(implement.artifacts.map((a) => a.path)).toEqual(['package.json', 'src/greet.js', 'test/greet.test.js']);
    expect(implement.artifacts.every((a) => /^[0-9a-f]{64}$/.test(a.sha256) && a.bytes > 0)).toBe(true);
    expect(implement.outputs).toEqual({ files: ['src/greet.js', 'test/greet.test.js'] });

    for (const id of ['spec', 'implement', 'review']) {
      const result = state.stages.find((s) => s.id === id)!.result!;
      expect(result.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(result.numTurns).toBeGreaterThanOrEqual(2);
      expect(result.costUsd).toBeGreaterThan(0);
      expect(result.usage.inputTokens).toBeGreaterThan(0);
    }
    expect(state.costUsd).toBeGreaterThan(0);

    // The implement stage's test really ran inside the agent's Bash tool.
    const requests = harness.modelServer.requests().filter((r) => r.rule === 'implement');
    expect(JSON.stringify(requests.at(-1)?.body)).toContain('ok');
  });
});
