import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../src/dev/model-server.js';
import { createHarness, type Harness } from '../helpers/harness.js';

/*
 * Prompt assembly end to end: a real worker runs a CLI stage (the real `claude`) and an API stage
 * (the real SDK) against the scripted model server, and the test reads what the model received.
 */

const PLAN = '# Plan\\n\\nShip umbrellas by drone.\\n';

let harness: Harness;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'stage-prompt-'));
  const files: Record<string, string> = {
    'brief.md': 'We sell umbrellas.\n',
    'agents/writer.md': '---\nname: writer\ndescription: Writes plans\ntools: Edit\n---\nYou are a planner who writes short plans.\n',
    'handoff.yaml': [
      'name: handoff',
      'context: [brief.md]',
      'inputs: { topic: { default: drones } }',
      'defaults: { heartbeatTimeout: 30s, stallTimeout: 1m, retries: 1, permissionMode: dontAsk }',
      'stages:',
      '  - id: write',
      '    agent: agents/writer.md',
      '    prompt: |',
      '      Write docs/plan.md about {{inputs.topic}}.',
      '  - id: announce',
      '    needs: [write]',
      '    backend: anthropic-api',
      '    model: haiku',
      '    inputs: [{ path: docs/plan.md, from: write }]',
      '    prompt: Announce the plan by {{stages.write.outputs.author}}.',
    ].join('\n'),
    'missing-input.yaml': [
      'name: missing-input',
      'defaults: { heartbeatTimeout: 30s, retries: 2 }',
      'stages:',
      '  - id: announce',
      '    backend: anthropic-api',
      '    inputs: [docs/plan.md]',
      '    prompt: Announce it.',
    ].join('\n'),
  };
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), text);
  }
  harness = await createHarness('stage-prompt', {
    scenario: {
      rules: [
        {
          match: 'Stage: write ·',
          turns: [
            { text: 'Writing the plan.', tool: { name: 'Edit', input: { file_path: 'docs/plan.md', old_string: '', new_string: PLAN.replaceAll('\\n', '\n') } } },
            { text: 'Done.\n```json\n{"success": true, "summary": "Wrote the plan.", "outputs": {"author": "writer", "files": ["docs/plan.md"]}}\n```' },
          ],
        },
        { match: 'Stage: announce ·', turns: [{ text: 'Umbrellas by drone!\n```json\n{"success": true, "summary": "Announced.", "outputs": {}}\n```' }] },
      ],
    },
  });
});
afterAll(async () => {
  await harness?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The text the model got as the first user message, and the system prompt, of the first request matching `stage`. */
function promptOf(requests: RecordedRequest[], stage: string): { user: string; system: string } {
  const request = requests.find((r) => r.path === '/v1/messages' && JSON.stringify(r.body).includes(`Stage: ${stage} ·`));
  if (!request) throw new Error(`no request for stage ${stage}`);
  type Content = string | { text?: string }[] | undefined;
  const body = request.body as { system?: Content; messages: { content: Content }[] };
  const text = (content: Content): string =>
    typeof content === 'string' ? content : (content ?? []).map((b) => b.text ?? '').join('\n');
  return { user: text(body.messages[0].content), system: text(body.system) };
}

describe('stage prompts in a real run', () => {
  it('give the CLI the persona, context and task, and give the API stage the earlier file inlined', async () => {
    const state = await harness.finish(await harness.start(path.join(dir, 'handoff.yaml')));
    expect(state.status).toBe('completed');
    const requests = harness.modelServer.requests();

    const write = promptOf(requests, 'write');
    expect(write.system).toContain('You are a planner who writes short plans.');
    expect(write.user).toContain('## Your task\nWrite docs/plan.md about drones.');
    expect(write.user).toContain('## Project context\n### brief.md\n```\nWe sell umbrellas.\n```');
    expect(write.user).toContain('"success": true, "summary": "one or two sentences');

    const announce = promptOf(requests, 'announce');
    expect(announce.user).toContain('Announce the plan by writer.');
    // The API stage gets earlier work as a system block ahead of its persona, where it can be cached.
    expect(announce.system).toContain('## Input files\n### docs/plan.md (written by stage write)\n```\n# Plan\n\nShip umbrellas by drone.\n```');
    expect(announce.system).toContain('### write: Wrote the plan.');

    const [, announced] = state.stages;
    expect(announced.result?.artifacts.map((a) => a.path)).toEqual(['outputs/announce.md']);
    const transcript = await readFile(path.join(harness.workspacesRoot, announced.result!.transcript!), 'utf8');
    expect(JSON.parse(transcript.split('\n')[0])).toMatchObject({ type: 'system', subtype: 'init', backend: 'anthropic-api' });
  });

  it('fail a stage whose declared input is missing, once, naming the path', async () => {
    harness.modelServer.reset();
    const state = await harness.finish(await harness.start(path.join(dir, 'missing-input.yaml')));
    expect(state.status).toBe('failed');
    expect(state.stages[0].error).toMatchObject({ type: 'INPUT_NOT_FOUND' });
    expect(state.stages[0].error?.message).toContain('input docs/plan.md is missing from the workspace');
    expect(state.stages[0].error?.message).toContain('no earlier stage reported it');
    expect(harness.modelServer.requests()).toHaveLength(0);
  });
});
