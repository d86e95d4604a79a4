import { listTemplateVariables, renderTemplate, type TemplateContext } from './template.js';

/**
 * Branch names from templates. Values come from people (`{{inputs.title}}` = "Fix login / logout"), so each
 * substituted value becomes one safe path component, and the whole name is then made to follow
 * `git check-ref-format --branch`. Pure.
 */

/** The run's branch when `workspace.branch` is not set. */
export const DEFAULT_BRANCH_TEMPLATE = 'agent/{{run.id}}';

/** Characters git refuses in a ref name, plus space and `/` (a value must not add path levels). */
const UNSAFE_IN_VALUE = /[\s/\\~^:?*[\]{}\x00-\x1f\x7f]+|\.{2,}|@\{/g;

/** One substituted value as a single safe path component: runs of unsafe characters become `-`. */
export function sanitizeBranchValue(value: string): string {
  return value.replace(UNSAFE_IN_VALUE, '-').replace(/-{2,}/g, '-').replace(/^[-.]+|[-.]+$/g, '');
}

/**
 * A whole branch name made valid for git: no empty, `.`-leading or `.lock`-ending components, no `..`, `@{`,
 * control characters, spaces or `~^:?*[\`, no leading `-`, no trailing `/` or `.`. Keeps `/` between levels.
 */
export function sanitizeBranchName(name: string): string {
  const components = name
    .split('/')
    .map(sanitizeComponent)
    .filter((part) => part !== '');
  const joined = components.join('/');
  return joined === '' || joined === '@' ? 'agent-pipeline-run' : joined;
}

/** A path component git accepts: sanitised, and not ending in `.lock` (even after trimming). */
function sanitizeComponent(part: string): string {
  let component = sanitizeBranchValue(part);
  while (/\.lock$/i.test(component)) component = sanitizeBranchValue(component.slice(0, -'.lock'.length));
  return component;
}

/**
 * Renders a branch template: every variable is looked up as `renderTemplate` does (unknown ones throw its
 * `TemplateError`), each value is sanitised into one component, then the whole name is sanitised.
 * `beads-{{inputs.id}}-{{inputs.title}}` with id 7 and title "Fix login / logout" gives `beads-7-Fix-login-logout`.
 */
export function renderBranchName(template: string, context: TemplateContext, templateName = 'workspace.branch'): string {
  // Checks every variable at once, so the error lists them all.
  renderTemplate(template, context, templateName);
  let rendered = template;
  for (const variable of listTemplateVariables(template)) {
    const value = sanitizeBranchValue(renderTemplate(`{{${variable}}}`, context, templateName));
    rendered = rendered.replace(new RegExp(`\\{\\{\\s*${variable.replace(/[.]/g, '\\.')}\\s*\\}\\}`, 'g'), () => value);
  }
  return sanitizeBranchName(rendered);
}
