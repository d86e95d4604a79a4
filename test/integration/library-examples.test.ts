import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { createTypeChecker } from '../helpers/type-check.js';

/*
 * The scripts in examples/scripts/, compiled against the built package (they import `agent-pipeline` as a user's code
 * does) and run as their own processes against the dev server, a worker and the scripted model server.
 */

const EXAMPLES = path.join(PROJECT_ROOT, 'examples', 'scripts');
const COMPILED = path.join(PROJECT_ROOT, 'dist', 'examples', 'scripts');

async function runExample(name: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ exitCode?: number; stdout: string; stderr: string }> {
  const result = await execa('node', [path.join(COMPILED, `${name}.js`), ...args], { cwd: PROJECT_ROOT, env, extendEnv: false, reject: false, timeout: 180_000, stdin: 'ignore' });
  return { exitCode: result.exitCode, stdout: String(result.stdout), stderr: String(result.stderr) };
}

describe('the example scripts', () => {
  let harness: Harness;

  beforeAll(async () => {
    // Type-checked under strict while compiling: a change to the library's types that breaks them fails here.
    // `tsc -p` in this process (test/helpers/type-check.ts): `npx tsc` cost an npm and a TypeScript start on top.
    const compiled = createTypeChecker()(path.join(EXAMPLES, 'tsconfig.json'));
    expect(compiled.errors, compiled.output).toBe(0);
    harness = await createHarness('examples', { scenario: path.join(EXAMPLES, 'scenario.yaml') });
  }, 300_000);
  afterAll(async () => harness?.close());

  test('start-and-wait.ts prints each stage event and the completed run with its artifacts', async () => {
    const result = await runExample('start-and-wait', [path.join(EXAMPLES, 'hello.yaml'), 'Ada'], harness.env);
    expect(result.exitCode, result.stderr).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toMatch(/^started hello-/);
    expect(lines).toContain('✔ greet completed: Wrote hello.md.');
    expect(lines).toContain('run ended: completed');
    expect(result.stdout).toMatch(/^completed · \$\d+\.\d{4} · artifacts: hello\.md$/m);
    // The input reached the agent's prompt.
    expect(JSON.stringify(harness.modelServer.requests().map((r) => r.body))).toContain('Write a greeting for Ada to hello.md.');
  });

  test('start-and-wait.ts copied out of the repository with its pipeline runs it from its own folder', async () => {
    // What docs/library.md tells users: the script and its YAML copied into a project of their own, run from there
    // with no arguments, as TypeScript (Node strips the types), `agent-pipeline` resolved from the project's node_modules.
    const project = await mkdtemp(path.join(tmpdir(), 'example-copy-'));
    try {
      await mkdir(path.join(project, 'node_modules'));
      await symlink(PROJECT_ROOT, path.join(project, 'node_modules', 'agent-pipeline'), 'dir');
      await writeFile(path.join(project, 'package.json'), '{ "type": "module" }\n');
      await mkdir(path.join(project, 'scripts'));
      for (const name of ['start-and-wait.ts', 'hello.yaml']) await copyFile(path.join(EXAMPLES, name), path.join(project, 'scripts', name));
      const result = await execa('node', [path.join('scripts', 'start-and-wait.ts')], { cwd: project, env: harness.env, extendEnv: false, reject: false, timeout: 180_000, stdin: 'ignore' });
      expect(result.exitCode, String(result.stderr)).toBe(0);
      expect(String(result.stdout)).toContain('run ended: completed');
    } finally {
      await rm(project, { recursive: true, force: true });
    }
  });

  test('auto-approve.ts approves the gate its rule allows and the run completes', async () => {
    const result = await runExample('auto-approve', [path.join(EXAMPLES, 'release.yaml'), '^release$'], harness.env);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stdout).toContain('approved release');
    expect(result.stdout).toContain('run ended: completed');
    expect(result.stdout).toMatch(/^status: completed$/m);
  });

  test('auto-approve.ts leaves a gate its rule does not allow to a person, with the command that moves it on', async () => {
    const result = await runExample('auto-approve', [path.join(EXAMPLES, 'release.yaml'), '^deploy$'], harness.env);
    expect(result.exitCode).toBe(1);
    const runId = /^started (\S+)$/m.exec(result.stdout)![1];
    expect(result.stdout).toContain(`release waits for a person: agent-pipeline approve ${runId} --stage release`);
    expect(result.stdout).toMatch(/^status: waiting$/m);
    await harness.client.workflow.getHandle(runId).cancel();
  });

  test('custom-backend.ts runs a stage on a backend its own worker registers', async () => {
    // Its own task queue: the harness's worker does not know the `shout` backend.
    const env = { ...harness.env, AGENT_PIPELINE_TASK_QUEUE: `${harness.taskQueue}-custom` };
    const result = await runExample('custom-backend', [path.join(EXAMPLES, 'shout.yaml')], env);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^run shout-\S+ completed; shout on shout: Shouted \d+ characters\. \(SHOUT\.txt\)$/m);
    const workspace = /^workspace: (.+)$/m.exec(result.stdout)![1];
    expect(path.dirname(workspace)).toBe(harness.workspacesRoot);
    // The rendered prompt (the input's default filled in), in capitals.
    expect(await readFile(path.join(workspace, 'SHOUT.txt'), 'utf8')).toContain('HELLO FROM A CUSTOM BACKEND');
  });
});
