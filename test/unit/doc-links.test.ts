import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * The README is a front page and the reference lives in docs/ (issue 32). Moving text between them breaks links
 * silently on GitHub, so every relative link and anchor of README.md, docs/**\/*.md and examples/**\/README.md is
 * checked here: the target exists inside the repository and, for `#anchor`, the target has a heading (or an
 * `<a id>`/`<a name>`) with that GitHub slug. Links to other sites are out of scope; links out of the repository
 * are refused, since the README and docs must stand alone.
 */

const README_MAX_LINES = 250;

/** The markdown files whose links are checked, relative to `root`. */
function documentationFiles(root: string): string[] {
  const found = ['README.md'];
  const walk = (dir: string, take: (name: string) => boolean): void => {
    if (!existsSync(path.join(root, dir))) return;
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const relative = path.posix.join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== 'node_modules') walk(relative, take);
      else if (entry.isFile() && take(entry.name)) found.push(relative);
    }
  };
  walk('docs', (name) => name.endsWith('.md'));
  walk('examples', (name) => name === 'README.md');
  return found.filter((file) => existsSync(path.join(root, file)));
}

/** Lines outside fenced code blocks, with their 1-based numbers. */
function proseLines(text: string): { line: number; text: string }[] {
  const lines: { line: number; text: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, index) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = undefined;
      return;
    }
    if (marker !== undefined) fence = marker;
    else lines.push({ line: index + 1, text: line });
  });
  return lines;
}

/** Inline code spans blanked out, so that a link written as code is not a link. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)(?:(?!\1)[^])*?\1/g, (span) => ' '.repeat(span.length));
}

/** GitHub's heading slug: lowercase, punctuation but hyphens dropped, each space a hyphen. */
export function githubSlug(heading: string): string {
  const text = heading
    .split(/(`+[^`]*`+)/)
    .map((part, index) => (index % 2 === 1 ? part.replace(/^`+|`+$/g, '') : part
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/[*]/g, '')))
    .join('');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
}

/** Every anchor a markdown file offers: its headings' slugs (duplicates get -1, -2, …) and explicit `<a id|name>`. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text: line } of proseLines(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const slug = githubSlug(heading);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const explicit of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*["']([^"']+)["']/gi)) anchors.add(explicit[1]);
  }
  return anchors;
}

/** The link targets of one line: inline links and images, reference definitions, `href`s. */
function linkTargets(line: string): string[] {
  const code = withoutCodeSpans(line);
  const targets = [...code.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+["'][^)]*["'])?\s*\)/g)].map((m) => m[1]);
  const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(code)?.[1];
  if (definition !== undefined) targets.push(definition);
  for (const href of code.matchAll(/\bhref\s*=\s*["']([^"']*)["']/gi)) targets.push(href[1]);
  return targets;
}

/** Why `target`, linked from `file`, is broken; undefined when it is fine or out of scope (another site). */
function problemOf(root: string, file: string, target: string, anchorCache: Map<string, Set<string>>): string | undefined {
  if (/^(https?|mailto):/i.test(target)) return undefined;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return 'not a relative link (only http(s) and mailto links may leave the repository)';
  if (target.startsWith('/')) return 'an absolute path: link relative to the file instead';
  const hash = target.indexOf('#');
  const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const resolved = pathPart === '' ? path.join(root, file) : path.resolve(path.dirname(path.join(root, file)), pathPart);
  const inRepo = path.relative(root, resolved);
  if (inRepo.startsWith('..') || path.isAbsolute(inRepo)) return 'points outside the repository: the README and docs must stand alone';
  if (!existsSync(resolved)) return `${inRepo} does not exist`;
  if (anchor === undefined) return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) return `#${anchor} on ${inRepo}, which is not a markdown file`;
  let anchors = anchorCache.get(resolved);
  if (anchors === undefined) {
    anchors = anchorsOf(readFileSync(resolved, 'utf8'));
    anchorCache.set(resolved, anchors);
  }
  return anchors.has(anchor) ? undefined : `${inRepo} has no heading or <a id> whose anchor is #${anchor}`;
}

/** `file:line: (target) reason` for every broken relative link in `files` under `root`. */
function brokenLinks(root: string, files: string[]): string[] {
  const problems: string[] = [];
  const anchorCache = new Map<string, Set<string>>();
  for (const file of files) {
    for (const { line, text } of proseLines(readFileSync(path.join(root, file), 'utf8'))) {
      for (const target of linkTargets(text)) {
        const problem = problemOf(root, file, target, anchorCache);
        if (problem !== undefined) problems.push(`${file}:${line}: (${target}) ${problem}`);
      }
    }
  }
  return problems;
}

describe('the README and docs', () => {
  it(`keep the README a front page of at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
    expect(lines, `README.md has ${lines} lines; move detail to docs/ and link it`).toBeLessThanOrEqual(README_MAX_LINES);
  });

  it('link only to files and anchors that exist, inside the repository', () => {
    const files = documentationFiles(PROJECT_ROOT);
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/pipeline.md', 'docs/configuration.md', 'docs/performance.md']));
    expect(brokenLinks(PROJECT_ROOT, files)).toEqual([]);
  });
});

describe('the link check itself', () => {
  it('makes the slugs GitHub makes', () => {
    expect(githubSlug("The worker's own git")).toBe('the-workers-own-git');
    expect(githubSlug('Choosing `AGENT_PIPELINE_MAX_CONCURRENT_STAGES`')).toBe('choosing-agent_pipeline_max_concurrent_stages');
    expect(githubSlug('`agent-pipeline/testing`')).toBe('agent-pipelinetesting');
    expect(githubSlug('Testing pipelines offline: the scripted model server')).toBe('testing-pipelines-offline-the-scripted-model-server');
    expect(githubSlug('Retries, blocked agents, answers and structured inputs')).toBe('retries-blocked-agents-answers-and-structured-inputs');
    expect(githubSlug('A [linked](x.md) **bold** title')).toBe('a-linked-bold-title');
  });

  it('names the file, line and link of each broken one, and passes the good ones', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'doc-links-'));
    try {
      await mkdir(path.join(root, 'docs'));
      await mkdir(path.join(root, 'examples', 'one'), { recursive: true });
      await writeFile(path.join(root, 'docs', 'guide.md'), [
        '# Guide', '## Setup', '## Setup', '<a id="legacy-name"></a>', '```yaml', '# not-a-heading: inside code', '```', '',
      ].join('\n'));
      await writeFile(path.join(root, 'README.md'), [
        '# Front', '',
        '[ok](docs/guide.md) [ok](docs/guide.md#setup) [ok](docs/guide.md#setup-1) [ok](docs/guide.md#legacy-name)',
        '[ok](#front) [site](https://example.com/x) [folder](examples/one/) `[code](missing.md)`',
        '[gone](docs/missing.md) [anchor](docs/guide.md#setup-2)',
        '[fenced](docs/guide.md#not-a-heading-inside-code) [out](../shared/notes.md)',
        '```', '[in a fence](nowhere.md)', '```',
        '[ref]: docs/nope.md',
      ].join('\n'));
      await writeFile(path.join(root, 'examples', 'one', 'README.md'), '[up](../../docs/guide.md#setup) [file](file:///etc/passwd)\n');
      expect(brokenLinks(root, documentationFiles(root))).toEqual([
        'README.md:5: (docs/missing.md) docs/missing.md does not exist',
        'README.md:5: (docs/guide.md#setup-2) docs/guide.md has no heading or <a id> whose anchor is #setup-2',
        'README.md:6: (docs/guide.md#not-a-heading-inside-code) docs/guide.md has no heading or <a id> whose anchor is #not-a-heading-inside-code',
        'README.md:6: (../shared/notes.md) points outside the repository: the README and docs must stand alone',
        'README.md:10: (docs/nope.md) docs/nope.md does not exist',
        'examples/one/README.md:1: (file:///etc/passwd) not a relative link (only http(s) and mailto links may leave the repository)',
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
