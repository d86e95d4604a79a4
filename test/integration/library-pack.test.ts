import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * `npm pack` makes a package that works as it is (issue 21): the tarball carries the compiled dist/ (the library, the
 * CLI, the prebuilt workflow bundle), nothing runs at install (no `prepare`, which built the whole project in the
 * source folder on every install of a `file:` dependency), and the build runs before packing (`prepack`).
 *
 * The tarball is made with --ignore-scripts from the dist/ that `npm test` has just built: a build inside the test would
 * rewrite dist/ under the other test files. Installing it with `npm install --offline` needs every dependency's
 * registry metadata in npm's cache, which a fresh machine lacks; so the package is unpacked the way npm places it
 * (node_modules/agent-pipeline), with this project's node_modules as the folder its dependencies resolve from.
 */

interface PackResult {
  filename: string;
  files: { path: string }[];
}

describe('the npm package', () => {
  let dir: string;
  let tarball: string;
  let files: string[];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-pack-'));
    const packed = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: PROJECT_ROOT });
    const [result] = JSON.parse(packed.stdout) as PackResult[];
    tarball = path.join(dir, result.filename);
    files = result.files.map((f) => f.path);
  }, 120_000);
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('holds dist/ with every export, the CLI and the workflow bundle, and no sources or tests', async () => {
    const manifest = JSON.parse(await readFile(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types?: string; default?: string } | string> };
    for (const entry of Object.values(manifest.exports)) {
      for (const file of typeof entry === 'string' ? [entry] : [entry.types, entry.default]) expect(files).toContain(file!.replace(/^\.\//, ''));
    }
    expect(files).toEqual(expect.arrayContaining(['bin/agent-pipeline.js', 'dist/client.js', 'dist/worker.js', 'dist/workflow-bundle.js', 'examples/demo/pipeline.yaml', 'README.md']));
    expect(files.filter((f) => /^(src|test|bench|dist\/bench)\//.test(f))).toEqual([]);
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
    const project = path.join(dir, 'project');
    const installed = path.join(project, 'node_modules', 'agent-pipeline');
    await mkdir(installed, { recursive: true });
    await execa('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
    // The package's dependencies resolve from the folder above the project, as from a hoisted node_modules.
    await symlink(path.join(PROJECT_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { 'agent-pipeline': '0.1.0' } }));
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
