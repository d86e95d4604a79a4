import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createHarness, PROJECT_ROOT, type Harness } from '../helpers/harness.js';
import { createTypeChecker } from '../helpers/type-check.js';
import { CLI_FIXTURES } from './cli-helpers.js';

/*
 * agent-pipeline as another project uses it: a folder of its own with `agent-pipeline` as a `file:` dependency
 * (installed by npm), TypeScript under `strict` type-checking against the package's exported types, and the compiled
 * script starting a pipeline, following its events and getting its result.
 */

const CONSUMER = `import { PipelineClient, RunFailedError, type RunEvent, type RunState } from 'agent-pipeline';
import type { Backend, BackendRequest } from 'agent-pipeline/worker';
import { startModelServer } from 'agent-pipeline/testing';

const file = process.argv[2];
if (!file) throw new Error('usage: main.js PIPELINE');

// A backend written against the public type: its parameter is typed, not any.
const noop: Backend = async (request: BackendRequest) => ({
  text: request.stage.id, usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, numTurns: 0, durationMs: 0, warnings: [],
});

const client = await PipelineClient.connect();
try {
  const run = await client.start(file, { inputs: { topic: 'tea' } });
  const events: RunEvent['type'][] = [];
  for await (const event of run.events({ intervalMs: 500 })) {
    events.push(event.type);
    if (event.type === 'stage_completed') console.error(\`\${event.stage}: \${event.result?.summary}\`);
  }
  const state: RunState = await run.result();
  // @ts-expect-error RunState has no field "nope": the package's types are real, not any.
  void state.nope;
  console.log(JSON.stringify({ id: run.id, events, status: state.status, stages: state.stages.map((s) => [s.id, s.status]), backendType: typeof noop, testing: typeof startModelServer }));
} catch (err) {
  if (err instanceof RunFailedError) console.log(JSON.stringify({ failed: err.code, type: err.type }));
  else throw err;
} finally {
  await client.close();
}
`;

describe('a project with agent-pipeline as a file: dependency', () => {
  let harness: Harness;
  let dir: string;
  /**
   * `tsc -p` in this process (test/helpers/type-check.ts): both checks read the package's and Node's declarations,
   * parsed once for both, where a `tsc` process each cost the file six CPU seconds.
   */
  const typeCheck = createTypeChecker();

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-consumer-'));
    await writeFile(
      path.join(dir, 'package.json'),
      JSON.stringify({
        name: 'consumer',
        private: true,
        type: 'module',
        dependencies: { 'agent-pipeline': `file:${PROJECT_ROOT}`, '@types/node': `file:${path.join(PROJECT_ROOT, 'node_modules', '@types', 'node')}` },
      }),
    );
    await writeFile(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, types: ['node'], outDir: 'out' }, include: ['main.ts'] }),
    );
    await writeFile(path.join(dir, 'main.ts'), CONSUMER);
    const installed = await execa('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, reject: false });
    expect(installed.exitCode, `${installed.stdout}${installed.stderr}`).toBe(0);
    harness = await createHarness('consumer', { scenario: path.join(CLI_FIXTURES, 'scenario.yaml') });
  }, 300_000);
  afterAll(async () => {
    await harness?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('type-checks under strict, then starts a pipeline, follows its events and gets its result', async () => {
    const compiled = typeCheck(path.join(dir, 'tsconfig.json'));
    expect(compiled.errors, compiled.output).toBe(0);

    const result = await execa('node', ['out/main.js', path.join(CLI_FIXTURES, 'basic.yaml')], { cwd: dir, env: harness.env, extendEnv: false, reject: false, timeout: 180_000 });
    expect(result.exitCode, String(result.stderr)).toBe(0);
    const report = JSON.parse(String(result.stdout)) as { id: string; events: string[]; status: string; stages: [string, string][]; backendType: string; testing: string };
    expect(report).toMatchObject({ status: 'completed', stages: [['write', 'completed'], ['check', 'completed']], backendType: 'function', testing: 'function' });
    expect(report.id).toMatch(/^cli-basic-/);
    // Polling may miss a short "started" state, but never a stage's end, and the run's end comes last.
    expect(report.events.filter((e) => e === 'stage_completed')).toHaveLength(2);
    expect(report.events.at(-1)).toBe('run_ended');
    expect(String(result.stderr)).toContain('write: Wrote notes.md.');
  });

  test('a type error in the script fails the strict type-check', async () => {
    await writeFile(path.join(dir, 'bad.ts'), `import { PipelineClient } from 'agent-pipeline';\nconst client = await PipelineClient.connect();\nawait client.start(42);\n`);
    const compilerOptions = { noEmit: true, strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', skipLibCheck: true, types: ['node'] };
    await writeFile(path.join(dir, 'tsconfig.bad.json'), JSON.stringify({ compilerOptions, files: ['bad.ts'] }));
    const checked = typeCheck(path.join(dir, 'tsconfig.bad.json'));
    expect(checked.errors).toBeGreaterThan(0);
    expect(checked.output).toMatch(/bad\.ts\(3,\d+\): error TS2345: Argument of type 'number' is not assignable to parameter of type 'PipelineSource(<never>)?'/);
  });
});
