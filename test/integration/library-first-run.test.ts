import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { installPackedPackage, packedPackage, type InstalledPackage } from '../helpers/packed-package.js';
import { findTemporalCli } from '../../src/dev/temporal-cli.js';

/*
 * "Your first run, in one file" of docs/library.md, as a package user meets it (issue 34): the block is read from the
 * docs inside the packed package, saved in a fresh project that has only the installed package, type-checked under
 * strict TypeScript and run with Node. It starts its own dev server, the scripted model server, a worker whose stage
 * runs the real `claude` CLI, and a client following the run's events.
 */

/** The program between `<!-- first-run -->` and the end of the code block after it. */
function firstRunBlock(docs: string): string | undefined {
  return /<!-- first-run -->\n```ts\n([\s\S]*?)\n```\n/.exec(docs)?.[1];
}

/** The test run's environment without the settings the program must not depend on (a model key, a Temporal server, a queue). */
function userEnv(temporalCli: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^(ANTHROPIC_|TEMPORAL_|AGENT_PIPELINE_|CLAUDE_)/.test(name)) env[name] = value;
  // The Temporal CLI this machine has, so that nothing is fetched or built.
  return { ...env, TEMPORAL_CLI: temporalCli };
}

describe('the first run of docs/library.md, from the packed package', () => {
  let dir: string;
  let consumer: InstalledPackage;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-first-run-'));
    consumer = await installPackedPackage(dir, await packedPackage());
  }, 300_000);
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  test('type-checks under strict TypeScript and runs with Node: dev server, scripted model, worker, client, events', async () => {
    const { project, installed } = consumer;
    // The docs shipped in the package hold the program.
    const program = firstRunBlock(await readFile(path.join(installed, 'docs', 'library.md'), 'utf8'));
    expect(program, 'the block after <!-- first-run --> in docs/library.md').toBeDefined();
    await writeFile(path.join(project, 'first-run.ts'), program!);
    const compilerOptions = { strict: true, skipLibCheck: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true, types: ['node'] };
    await writeFile(path.join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['first-run.ts'] }));
    const tsc = path.join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const checked = await execa('node', [tsc, '-p', 'tsconfig.json'], { cwd: project, reject: false, timeout: 240_000 });
    expect(checked.exitCode, `${checked.stdout}${checked.stderr}`).toBe(0);

    // Node strips the types (22.18 and later; the flag keeps 22.13 to 22.17 working too).
    const run = await execa('node', ['--experimental-strip-types', '--no-warnings', 'first-run.ts'], {
      cwd: project,
      env: userEnv(await findTemporalCli()),
      extendEnv: false,
      stdin: 'ignore',
      reject: false,
      // Generous: the machine running the suite may be loaded. The program must also end by itself (no open handle).
      timeout: 300_000,
      forceKillAfterDelay: 10_000,
    });
    expect(run.timedOut, `the program did not end\n${run.stdout}\n${run.stderr}`).toBe(false);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n')).toEqual(['stage_started hello', 'stage_completed hello', 'run_ended completed', 'result completed Hello, reader!']);
    // The run's workspace is where the docs say, in the user's project.
    expect(await readFile(path.join(project, '.agent-pipeline', 'workspaces'), 'utf8').catch((err: NodeJS.ErrnoException) => err.code)).toBe('EISDIR');
  }, 660_000);
});
