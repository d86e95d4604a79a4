import { describe, expect, it } from 'vitest';
import { compareUrlFor } from '../../src/activities/delivery/pull-request.js';
import { renderBranchName, sanitizeBranchName } from '../../src/pipeline/branch-name.js';
import { TemplateError, type TemplateContext } from '../../src/pipeline/template.js';

const context = (inputs: Record<string, string>): TemplateContext => ({ inputs, stages: {}, run: { id: 'run-1', pipeline: 'p' }, attempt: 1 });

describe('branch names from templates', () => {
  it.each([
    ['beads-{{inputs.id}}-{{inputs.title}}', { id: '7', title: 'Fix login / logout' }, 'beads-7-Fix-login-logout'],
    ['agent/{{run.id}}', {}, 'agent/run-1'],
    ['work/{{inputs.title}}', { title: '  ..hidden: a?b*c [x] ~^ @{now}.lock ' }, 'work/hidden-a-b-c-x-now'],
    ['{{inputs.title}}', { title: '-leading dash' }, 'leading-dash'],
    ['team//{{inputs.title}}/', { title: 'tab\there' }, 'team/tab-here'],
    ['{{inputs.title}}', { title: '///' }, 'agent-pipeline-run'],
  ])('renders %s with %o as %s', (template, inputs, expected) => {
    expect(renderBranchName(template, context(inputs))).toBe(expected);
  });

  it('lists every unknown variable, as other templates do', () => {
    expect(() => renderBranchName('{{inputs.a}}-{{inputs.b}}', context({}))).toThrow(TemplateError);
    expect(() => renderBranchName('{{inputs.a}}-{{inputs.b}}', context({}))).toThrow(/\{\{inputs\.a\}\}, \{\{inputs\.b\}\}/);
  });

  it('makes a literal name valid too', () => {
    expect(sanitizeBranchName('release..v1.lock')).toBe('release-v1');
  });
});

describe('the compare URL of a pushed branch', () => {
  it.each([
    ['https://github.com/acme/widgets.git', 'https://github.com/acme/widgets/compare/main...agent/run-1?expand=1'],
    ['git@github.com:acme/widgets.git', 'https://github.com/acme/widgets/compare/main...agent/run-1?expand=1'],
    ['ssh://git@github.com/acme/widgets', 'https://github.com/acme/widgets/compare/main...agent/run-1?expand=1'],
    ['https://gitlab.com/acme/widgets.git', 'https://gitlab.com/acme/widgets/-/merge_requests/new?merge_request%5Bsource_branch%5D=agent%2Frun-1&merge_request%5Btarget_branch%5D=main'],
    ['git@bitbucket.org:acme/widgets.git', 'https://bitbucket.org/acme/widgets/pull-requests/new?source=agent%2Frun-1&dest=main'],
    ['/srv/git/widgets.git', undefined],
  ])('of remote %s is %s', (url, expected) => {
    expect(compareUrlFor(url, 'agent/run-1', 'main')).toBe(expected);
  });
});
