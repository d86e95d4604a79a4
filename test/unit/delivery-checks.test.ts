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

describe('validate and the templates outside the prompt', () => {
  async function problemsOf(lines: string[]): Promise<string[]> {
    const dir = await mkdtemp(path.join(tmpdir(), 'validate-templates-'));
    try {
      const file = path.join(dir, 'p.yaml');
      await writeFile(file, lines.join('\n'));
      const { problems } = await validatePipelineFile(file);
      return problems.map((p) => `${p.field}: ${p.message}`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('checks appendSystemPrompt, set on a stage or in defaults, as it checks the prompt', async () => {
    const problems = await problemsOf([
      'name: p',
      'inputs: { elicitation: { default: "x" } }',
      'defaults: { appendSystemPrompt: "Elicit {{inputs.elicitation}} {{inputs.missing}}." }',
      'stages:',
      '  - { id: work, prompt: "Do it." }',
      '  - { id: check, prompt: "Check it.", appendSystemPrompt: "After {{stages.nope.summary}}." }',
    ]);
    expect(problems).toEqual([
      expect.stringMatching(/^defaults\.appendSystemPrompt: appendSystemPrompt \{\{inputs\.missing\}\}: unknown template variable.* \(the default of stage work\)$/),
      expect.stringMatching(/^stages\[1\]\.appendSystemPrompt: appendSystemPrompt \{\{stages\.nope\.summary\}\}: unknown template variable: the stage does not run after "nope"; add it to needs/),
    ]);
  });

  it('reports a defaults template once, at its own line, naming the stages that take it', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'validate-defaults-'));
    try {
      const file = path.join(dir, 'p.yaml');
      const lines = ['name: p', 'defaults:', '  commitMessage: "Bead {{inputs.bead}}"', 'stages:', '  - { id: work, prompt: "Do it.", commit: true }', '  - { id: review, needs: [work], prompt: "Review it." }', '  - { id: own, prompt: "Own it.", commitMessage: "Own {{inputs.bead}}" }'];
      await writeFile(file, lines.join('\n'));
      const { problems } = await validatePipelineFile(file);
      // Before: once per stage, each at that stage's `id` line (`stages[1].id: commitMessage {{inputs.bead}}: …`).
      expect(problems.map((p) => `${p.line} ${p.field}: ${p.message}`)).toEqual([
        expect.stringMatching(/^3 defaults\.commitMessage: commitMessage \{\{inputs\.bead\}\}: unknown template variable.* \(the default of stages work, review\)$/),
        expect.stringMatching(/^7 stages\[2\]\.commitMessage: commitMessage \{\{inputs\.bead\}\}: unknown template variable/),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('for a field a stage does not have, names the fields it has rather than asking for needs it already has', async () => {
    const problems = await problemsOf([
      'name: p',
      'stages:',
      '  - { id: test, prompt: "Test it." }',
      '  - { id: fix, needs: [test], prompt: "Fix it if {{stages.test.success}}." }',
    ]);
    expect(problems).toEqual([expect.stringContaining('stage "test" runs before this one, but has no field "success": its fields are summary, answer, artifacts, status, error, outputs.KEY and report.FIELD; a value the agent reports is {{stages.test.outputs.success}} (in `outputs`) or {{stages.test.report.success}} (a top-level field of its report)')]);
    expect(problems[0]).not.toContain('needs');
  });

  it('knows {{run.delivery.push}} and the rest in finally stages only', async () => {
    const problems = await problemsOf([
      'name: p',
      'stages:',
      '  - { id: work, prompt: "Push was {{run.delivery.push}}." }',
      'finally:',
      '  - { id: record, prompt: "Record {{run.status}} {{run.delivery.push}} {{run.delivery.branch}} {{run.delivery.pullRequest}} {{run.delivery.url}}." }',
    ]);
    expect(problems).toEqual([expect.stringMatching(/^stages\[0\]\.prompt \{\{run\.delivery\.push\}\}: unknown template variable/)]);
  });
});
