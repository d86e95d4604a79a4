import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { installPackedPackage, packedPackage, type PackedPackage } from '../helpers/packed-package.js';

/*
 * `npm pack` makes a package that works as it is (issue 21): the tarball carries the compiled dist/ (the library, the
 * CLI, the prebuilt workflow bundle), nothing runs at install (no `prepare`, which built the whole project in the
 * source folder on every install of a `file:` dependency), and the build runs before packing (`prepack`).
 *
 * The tarball is packed once per build and shared with the other files that install it (test/helpers/packed-package.ts,
 * which says how it is packed and installed).
 */

describe('the npm package', () => {
  let dir: string;
  let packed: PackedPackage;
  let tarball: string;
  let files: string[];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-pack-'));
    packed = await packedPackage();
    ({ tarball, files } = packed);
  }, 300_000);
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('holds dist/ with every export, the CLI and the workflow bundle, and no sources or tests', async () => {
    const manifest = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types?: string; default?: string } | string> };
    for (const entry of Object.values(manifest.exports)) {
      for (const file of typeof entry === 'string' ? [entry] : [entry.types, entry.default]) expect(files).toContain(file!.replace(/^\.\//, ''));
    }
    expect(files).toEqual(expect.arrayContaining(['bin/agent-pipeline.js', 'dist/client.js', 'dist/worker.js', 'dist/workflow-bundle.js', 'examples/demo/pipeline.yaml', 'README.md']));
    expect(files.filter((f) => /^(src|test|bench|dist\/bench|dist\/examples)\//.test(f))).toEqual([]);
  });

  test('names no folder of the build machine in any shipped file, and every source map carries its sources (issue 34)', async () => {
    const unpacked = path.join(dir, 'unpacked');
    await mkdir(unpacked, { recursive: true });
    await execa('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1']);
    // The project's folder, and where its node_modules really are (a worktree may link them from elsewhere).
    const machinePaths = [...new Set([PROJECT_ROOT.replace(/\/$/, ''), path.dirname(await realpath(path.join(PROJECT_ROOT, 'node_modules')))])];
    const offending: string[] = [];
    for (const file of files) {
      const text = await readFile(path.join(unpacked, file), 'utf8');
      const source = file.endsWith('.js') ? inlineMapText(text) : '';
      if (machinePaths.some((p) => text.includes(p) || source.includes(p))) offending.push(file);
      if (file.endsWith('.map') || source) {
        const map = JSON.parse(file.endsWith('.map') ? text : source) as { sources: string[]; sourcesContent?: (string | null)[] };
        expect(map.sourcesContent?.filter((c) => typeof c === 'string').length, `${file} carries the text of its sources`).toBe(map.sources.length);
      }
    }
    expect(offending).toEqual([]);
  }, 120_000);

  test('every file the shipped README and docs link to or name under examples/ is in the package (issue 34)', async () => {
    const shipped = new Set(files);
    // A folder is shipped when a file under it is.
    for (const file of files) for (let at = file.indexOf('/'); at > 0; at = file.indexOf('/', at + 1)) shipped.add(file.slice(0, at));
    const pages = files.filter((f) => f === 'README.md' || (f.startsWith('docs/') && f.endsWith('.md')));
    expect(pages).toContain('docs/library.md');
    const missing: string[] = [];
    // docs/development.md is about working in a clone (building, benchmarks): it may name what only a clone has.
    for (const page of pages.filter((p) => p !== 'docs/development.md')) {
      const text = await readFile(path.join(PROJECT_ROOT, page), 'utf8');
      const links = [...text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]).filter((target) => !/^[a-z]+:/.test(target));
      const named = [...text.matchAll(/`(examples\/[^`\s]*)/g)].map((m) => m[1].replace(/[/),.:;]+$/, ''));
      for (const target of links) if (!shipped.has(path.posix.normalize(path.posix.join(path.posix.dirname(page), target)))) missing.push(`${page}: link ${target}`);
      for (const target of named) if (!shipped.has(target)) missing.push(`${page}: names ${target}`);
    }
    expect(missing).toEqual([]);
  });

  test("ships a changelog whose Breaking section names this release's changed defaults (issue 34)", async () => {
    expect(files).toContain('CHANGELOG.md');
    const changelog = (await execa('tar', ['-xzOf', tarball, 'package/CHANGELOG.md'])).stdout;
    const breaking = /### Breaking\n([\s\S]*?)\n### /.exec(changelog)?.[1] ?? '';
    // The sandbox's default, run folder names, the Node version, the default build id.
    for (const change of ['defaults to `required`', 'Run folders are named `<run id>-<hash of the id>-<hash of its first execution>`', 'Node 22 is required', 'default build id']) {
      expect(breaking, change).toContain(change);
    }
  });

  test('runs nothing when installed, and builds before it is packed', async () => {
    const { scripts } = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    // npm runs these on install (prepare also for git and folder dependencies); none may build.
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) expect(scripts[hook], hook).toBeUndefined();
    expect(scripts.prepack).toBe('npm run build');
    // The packed manifest is the one a user's npm sees.
    const listed = await execa('tar', ['-xzOf', tarball, 'package/package.json']);
    expect(Object.keys((JSON.parse(listed.stdout) as { scripts: Record<string, string> }).scripts)).not.toContain('prepare');
  });

  test('unpacked into a project, imports as a library and runs as a command, with no build', async () => {
    const { project, installed } = await installPackedPackage(dir, packed);
    await writeFile(
      path.join(project, 'main.mjs'),
      `import { PipelineClient, definePipeline, validatePipeline } from 'agent-pipeline';
import { createPipelineWorker } from 'agent-pipeline/worker';
import { startModelServer } from 'agent-pipeline/testing';
import { createRequire } from 'node:module';
const report = await validatePipeline(definePipeline({ name: 'p', stages: [{ id: 'a', prompt: 'Say hello.' }] }));
console.log(JSON.stringify({ from: createRequire(import.meta.url).resolve('agent-pipeline'), client: typeof PipelineClient.connect, worker: typeof createPipelineWorker, testing: typeof startModelServer, problems: report.problems }));
`,
    );
    const run = await execa('node', ['main.mjs'], { cwd: project, reject: false });
    expect(run.exitCode, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ from: path.join(installed, 'dist/library/index.js'), client: 'function', worker: 'function', testing: 'function', problems: [] });
    const cli = await execa('node', [path.join(installed, 'bin/agent-pipeline.js'), 'validate', path.join(installed, 'examples/demo/pipeline.yaml')], { cwd: project, reject: false });
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(cli.stdout).toContain('is valid');
  }, 120_000);
});

/** The JSON of a file's inline source map, or '' when it has none. */
function inlineMapText(code: string): string {
  const match = /\/\/# sourceMappingURL=data:application\/json;charset=utf-8;base64,([A-Za-z0-9+/=]+)\s*$/.exec(code);
  return match ? Buffer.from(match[1], 'base64').toString('utf8') : '';
}
