import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { validatePipelineFile } from '../../src/library/validate-pipeline.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';


const STAGES = 'stages:\n  - { id: work, prompt: Do the work., commit: true, commitMessage: "Bead {{inputs.id}}" }';

describe('git delivery fields in the pipeline file', () => {
  it('accepts push, pullRequest, keep, isolation and commitMessage together', () => {
    const text = [
      'name: p',
      'inputs: { id: { default: "1" } }',
      'workspace: { repo: ., push: { remote: origin, onConflict: ask }, pullRequest: { title: "Bead {{inputs.id}}", draft: true }, keep: onFailure }',
      'isolation: stage',
      'defaults: { commitMessage: "Bead {{inputs.id}}" }',
      STAGES,
    ].join('\n');
    expect(pipelineProblems(text)).toEqual([]);
  });

  it('says what a pull request, isolation and the push step need', () => {
    const problems = pipelineProblems(['name: p', 'workspace: { repo: ., pullRequest: { title: T } }', 'isolation: stage', STAGES].join('\n'));
    expect(problems).toContain('workspace.pullRequest: a pull request needs the branch pushed first; add `push: { remote: origin }` to workspace');
    expect(pipelineProblems(['name: p', 'isolation: stage', STAGES].join('\n'))).toContain(
      'isolation: `isolation: stage` gives each stage its own git worktree, so it needs `workspace: { repo: ... }`',
    );
    const clash = pipelineProblems(['name: p', 'workspace: { repo: ., push: {} }', 'stages:', '  - { id: push, prompt: Push it. }'].join('\n'));
    expect(clash).toContain('stages[0].id: the stage id "push" is taken by the push of the run\'s branch (workspace.push); rename the stage');
  });

  it('rejects an unknown conflict policy or keep value with what is allowed', () => {
    const problems = pipelineProblems(['name: p', 'workspace: { repo: ., push: { onConflict: merge }, keep: sometimes }', STAGES].join('\n')).join('\n');
    expect(problems).toMatch(/workspace\.push\.onConflict: .*merge.*rebase-once.*ask.*fail/);
    expect(problems).toMatch(/workspace\.keep: .*sometimes.*always.*onFailure.*never/);
  });
});

describe('validate and the git delivery templates', () => {
  it('knows {{workspace.diff}} in a git workspace, and checks commitMessage and pullRequest variables', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'delivery-validate-'));
    try {
      const file = path.join(dir, 'p.yaml');
      await writeFile(
        file,
        [
          'name: p',
          'inputs: { id: { default: "1" } }',
          'workspace: { repo: ., push: {}, pullRequest: { title: "Bead {{inputs.id}} {{inputs.nope}}", body: "{{stages.work.summary}}" } }',
          'stages:',
          '  - { id: work, prompt: "Do it.", commit: true, commitMessage: "Bead {{inputs.id}}: {{inputs.title}}" }',
          '  - { id: review, needs: [work], prompt: "Review:\\n{{workspace.diff}}\\non {{workspace.branch}}" }',
        ].join('\n'),
      );
      const { problems } = await validatePipelineFile(file);
      expect(problems.map((p) => `${p.field}: ${p.message.split(':')[0]}`).sort()).toEqual([
        'stages[0].commitMessage: commitMessage {{inputs.title}}',
        'workspace.pullRequest.title: {{inputs.nope}}',
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
