import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * `import 'agent-pipeline'` loads the client library alone: not the command-line tool, the local dev infrastructure,
 * nor what only a worker needs. Checked on the built package (what users get), in a fresh Node process whose module
 * resolution hook writes down every module imported through ESM, plus every CommonJS module in the require cache
 * (packages such as @temporalio/activity are CommonJS, and CommonJS requires bypass the resolve hook).
 */

/** Runs in Node's loader thread; appends each resolved URL to the file named in its data, synchronously so none is lost. */
const RESOLVE_HOOK = `
import { appendFileSync } from 'node:fs';
let file;
export function initialize(data) { file = data.file; }
export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  appendFileSync(file, resolved.url + '\\n');
  return resolved;
}
`;

const ENTRY = path.join(PROJECT_ROOT, 'dist', 'library', 'index.js');

/** Imports `ENTRY` in a fresh process; returns the paths (or URLs, for builtins) of every module it loaded. */
async function modulesLoadedByImport(entry: string, record: string): Promise<string[]> {
  const script = `
import { createRequire, register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(RESOLVE_HOOK)}), { data: { file: ${JSON.stringify(record)} } });
await import(${JSON.stringify(pathToFileURL(entry).href)});
console.log(JSON.stringify(Object.keys(createRequire(${JSON.stringify(entry)}).cache)));
`;
  const child = await execa('node', ['--input-type=module', '-e', script], { cwd: PROJECT_ROOT, reject: false });
  expect(child.exitCode, String(child.stderr)).toBe(0);
  const viaEsm = (await readFile(record, 'utf8')).split('\n').filter(Boolean).map((url) => (url.startsWith('file:') ? new URL(url).pathname : url));
  const viaRequire = JSON.parse(String(child.stdout)) as string[];
  return [...new Set([...viaEsm, ...viaRequire])];
}

describe("import 'agent-pipeline'", () => {
  let dir: string;
  let loaded: string[];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-pipeline-standalone-'));
    loaded = await modulesLoadedByImport(ENTRY, path.join(dir, 'resolved.txt'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('records what it loads, ESM and CommonJS alike', () => {
    // Without these the checks below could pass on an empty record.
    expect(loaded).toContain(ENTRY);
    expect(loaded.some((file) => file.includes(`${path.sep}node_modules${path.sep}@temporalio${path.sep}client${path.sep}`))).toBe(true);
    expect(loaded.some((file) => file.endsWith('.js') && file.includes(`${path.sep}node_modules${path.sep}@temporalio${path.sep}common${path.sep}`))).toBe(true);
  });

  test('loads neither the command-line tool nor the dev infrastructure', () => {
    const under = (folder: string) => loaded.filter((file) => file.startsWith(path.join(PROJECT_ROOT, 'dist', folder) + path.sep));
    expect({ cli: under('cli'), dev: under('dev') }).toEqual({ cli: [], dev: [] });
  });

  test('loads no package only the command line or a worker needs: commander, execa, @temporalio/activity', () => {
    const packages = ['commander', 'execa', path.join('@temporalio', 'activity')];
    const offending = loaded.filter((file) => packages.some((name) => file.includes(`${path.sep}node_modules${path.sep}${name}${path.sep}`)));
    expect(offending).toEqual([]);
  });
});
