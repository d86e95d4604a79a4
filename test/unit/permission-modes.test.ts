import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { findClaudeBinary } from '../../src/activities/backends/claude-cli/claude-binary.js';
import { PERMISSION_MODES } from '../../src/pipeline/agent-access-schema.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

/* `permissionMode` accepts every mode the pinned Claude Code CLI accepts, read from its own --help. */

describe('permissionMode', () => {
  it('accepts every mode the pinned CLI lists in --help (and `default`, which it still takes)', async () => {
    const binary = await findClaudeBinary(process.env);
    expect(binary).toBeTruthy();
    const { stdout } = await execa(binary!, ['--help'], { env: { PATH: process.env.PATH, HOME: process.env.HOME } });
    const choices = /--permission-mode <mode>[\s\S]*?\(choices: ([^)]*)\)/.exec(stdout)?.[1];
    const listed = [...(choices ?? '').matchAll(/"([A-Za-z]+)"/g)].map((m) => m[1]);
    expect(listed.length).toBeGreaterThan(0);
    expect([...PERMISSION_MODES].sort()).toEqual([...listed, 'default'].sort());
    for (const mode of PERMISSION_MODES) {
      expect(pipelineProblems(`name: p\nstages:\n  - { id: a, prompt: Do it., permissionMode: ${mode} }\n`)).toEqual([]);
    }
  });
});
