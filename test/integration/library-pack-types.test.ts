import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { installPackedPackage, packedPackage, type InstalledPackage } from '../helpers/packed-package.js';
import { createTypeChecker, type TypeCheckOptions, type TypeCheckResult } from '../helpers/type-check.js';

/*
 * The packed package's types as a strict TypeScript project meets them (issue 34, item 11), under both module
 * resolutions a project may use with an ESM-only package: `nodenext` (Node's own rules, `exports` with the `import`
 * condition) and `bundler` (with `module: esnext`, as Vite and esbuild projects have it, and `module: preserve`). A
 * file imports every entry point of package.json's `exports` and uses the main types; `@ts-expect-error` lines prove
 * the types are the package's own and not `any` (a module whose types were not found would be `any`, and every
 * expected error would then be missing, which tsc reports).
 */

/** The project's tsconfig `compilerOptions` for each resolution tested. */
const RESOLUTIONS: Record<string, Record<string, unknown>> = {
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext' },
  'bundler, module esnext': { module: 'esnext', moduleResolution: 'bundler' },
  'bundler, module preserve': { module: 'preserve', moduleResolution: 'bundler' },
};

/** What a user's code does with the main types of each entry point. */
const USAGE = `import { ConfigError, PipelineClient, PipelineInvalidError, RUN_LIST_STATUSES, RunFailedError, RunHandle, definePipeline, validatePipeline, type RunEvent, type RunState, type StageResult, type ValidationReport } from 'agent-pipeline';
import { FAILURES, createPipelineWorker, type FailureType, type PipelineWorkerOptions, type StageBackend } from 'agent-pipeline/worker';
import { parseScenario, startDevServer, startModelServer, type DevServer, type ModelServer, type Scenario } from 'agent-pipeline/testing';

export const pipeline = definePipeline({ name: 'typed', stages: [{ id: 'a', prompt: 'Write a.md.', timeout: '10m' }] });
// @ts-expect-error a backend nobody registered
definePipeline({ name: 'typed', stages: [{ id: 'a', prompt: 'Write a.md.', backend: 'anthropic' }] });
// @ts-expect-error not a duration
definePipeline({ name: 'typed', stages: [{ id: 'a', prompt: 'Write a.md.', timeout: '1 minute' }] });

export async function follow(client: PipelineClient): Promise<number> {
  const report: ValidationReport = await validatePipeline(pipeline);
  const run: RunHandle = await client.start(pipeline, { inputs: { who: 'Ada' } });
  for await (const event of run.events()) {
    const seen: RunEvent = event;
    if (seen.type === 'stage_progress') console.log(seen.progress.usage?.outputTokens);
    // @ts-expect-error run_ended carries no stage
    if (seen.type === 'run_ended') console.log(seen.stage);
  }
  try {
    const state: RunState = await run.result();
    const result: StageResult | undefined = state.stages[0]?.result;
    return (result?.costUsd ?? 0) + report.problems.length + RUN_LIST_STATUSES.length;
  } catch (err) {
    if (err instanceof RunFailedError) return err.state.stages.length;
    if (err instanceof PipelineInvalidError || err instanceof ConfigError) return -1;
    throw err;
  }
}

export const echo: StageBackend = async () => ({ text: 'ok', usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, numTurns: 1, durationMs: 0, warnings: [] });
const options: PipelineWorkerOptions = { backends: { echo }, logLevel: 'silent', sandbox: 'required' };
export const failure: FailureType = 'CONFIG_INVALID';
export const failures: number = Object.keys(FAILURES).length;
export const made = createPipelineWorker(options).then((worker) => worker.runUntil(Promise.resolve()));

export async function servers(): Promise<[DevServer, ModelServer]> {
  const scenario: Scenario = parseScenario('rules: [{ match: x, turns: [{ text: hi }] }]');
  // @ts-expect-error a scenario file's text, not its object
  parseScenario({ rules: [] });
  // @ts-expect-error the port is a number or 'auto'
  void startDevServer({ port: 'any' });
  return [await startDevServer({ port: 'auto', headless: true, dbFile: null }), await startModelServer({ scenario })];
}
`;

/**
 * One import per subpath of package.json's `exports` (its `./package.json` is the manifest, not an entry point): a
 * namespace import of a module, and a JSON file (the pipeline JSON Schema) as Node's ESM loads one, with its attribute.
 */
function importEveryEntryPoint(exportsField: Record<string, unknown>): string {
  const subpaths = Object.keys(exportsField).filter((key) => key !== './package.json');
  const lines = subpaths.map((key, i) => {
    const specifier = path.posix.join('agent-pipeline', key);
    return key.endsWith('.json') ? `import entry${i} from '${specifier}' with { type: 'json' };` : `import * as entry${i} from '${specifier}';`;
  });
  return `${lines.join('\n')}\nexport const entries: object[] = [${subpaths.map((_, i) => `entry${i}`).join(', ')}];\n`;
}

describe('the packed package under strict TypeScript', () => {
  let dir: string;
  let consumer: InstalledPackage;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-pack-types-'));
    consumer = await installPackedPackage(dir, await packedPackage());
    const manifest = JSON.parse(await readFile(path.join(consumer.installed, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    expect(Object.keys(manifest.exports)).toEqual(expect.arrayContaining(['.', './worker', './testing', './pipeline.schema.json']));
    await writeFile(path.join(consumer.project, 'entries.ts'), importEveryEntryPoint(manifest.exports));
    await writeFile(path.join(consumer.project, 'usage.ts'), USAGE);
  }, 300_000);
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  /**
   * Checks the two files with these options as `tsc -p` does (test/helpers/type-check.ts): in this process, the four
   * checks sharing the files they parse alike, where a `tsc` process each cost the file 20 CPU seconds.
   */
  const typeChecker = createTypeChecker();
  async function typeCheck(name: string, options: Record<string, unknown>, checkOptions?: TypeCheckOptions): Promise<TypeCheckResult> {
    const compilerOptions = { strict: true, target: 'es2022', lib: ['es2023'], types: ['node'], noEmit: true, ...options };
    const config = path.join(consumer.project, `tsconfig.${name.replace(/\W+/g, '-')}.json`);
    await writeFile(config, JSON.stringify({ compilerOptions, files: ['entries.ts', 'usage.ts'] }));
    return typeChecker(config, checkOptions);
  }

  /** The project's own files and the package's: not another package's (the project's node_modules but ours). */
  const ours = (file: string): boolean =>
    (file.startsWith(consumer.project + path.sep) && !file.includes(`${path.sep}node_modules${path.sep}`)) || file.startsWith(consumer.installed + path.sep);

  test.each(Object.entries(RESOLUTIONS))('a project with moduleResolution %s compiles every entry point with tsc --noEmit', async (name, resolution) => {
    // skipLibCheck as `tsc --init` writes it: the package's own declarations are still read for every type used.
    const checked = await typeCheck(name, { skipLibCheck: true, ...resolution });
    expect(checked.errors, checked.output).toBe(0);
  }, 300_000);

  test("with skipLibCheck off, the package's own declarations have no error", async () => {
    // Only our files are checked: other packages' declarations may have errors of their own (today @temporalio/common's
    // import of `ms`, whose package.json offers no types through its exports; docs/library.md says so), which are
    // theirs, and checking every one of them (@types/node's among them) was 13 of this file's 33 CPU-s (issue 32).
    const checked = await typeCheck('no-skip-lib-check', { skipLibCheck: false, ...RESOLUTIONS.nodenext }, { onlyFiles: ours });
    // Errors name their file first.
    const files = [...checked.output.matchAll(/^(\S+?)\(\d+,\d+\): error/gm)].map((m) => path.resolve(consumer.project, m[1]));
    expect(files.filter(ours), checked.output).toEqual([]);
    if (checked.errors !== 0) expect(files.length, checked.output).toBeGreaterThan(0);
  }, 300_000);
});
