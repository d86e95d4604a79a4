#!/usr/bin/env node
// @ts-check
/**
 * Bundles the command line (`npm run build`, after tsc): dist/client.js and the pure-JavaScript packages it loads into
 * one folder of ES modules, dist/cli-bundle/, which bin/agent-pipeline.js runs. A command then loads a few files
 * instead of six hundred (the Temporal client alone is about 300 CommonJS modules, each found, read, scanned for its
 * exports and wrapped): `status` or `list` start in about two thirds of the CPU time (docs/performance.md, "Command
 * start-up"). The unbundled dist/ stays what the library's exports, the workers and `worker`/`dev`/`demo` run.
 * Usage: node scripts/bundle-cli.js
 */
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DIST = path.join(ROOT, 'dist');
const BUNDLE_DIR = path.join(DIST, 'cli-bundle');

/**
 * The modules that run a worker in this process. They stay outside the bundle (imported from dist/ as they are), and
 * bin/agent-pipeline.js runs the commands that load them (`worker`, `dev`, `demo`) from the unbundled dist/client.js:
 * @temporalio/worker (a native runtime, workflow threads it starts from its own files) cannot be bundled, and a worker
 * must share one copy of the Temporal SDK with it (the activity context, the failure and payload classes).
 */
const WORKER_ENTRIES = ['worker/run-worker.js', 'worker/health-file.js', 'cli/local-stack.js'].map((file) => path.join(DIST, file));

/** Packages only a worker loads: a bundled module that imports one would load a second copy of the SDK. */
const WORKER_PACKAGES = /^@temporalio\/(worker|activity|core-bridge|testing)(\/|$)/;

/**
 * Keeps the worker entries out, refuses worker packages, and gives each of our modules the `import.meta.url` of its
 * own file in dist/ (which the package still ships), so that paths relative to a module (the demo's folder, the
 * package root, the compiled converters) resolve as they do unbundled, whichever chunk the module lands in.
 * @returns {import('rolldown').Plugin}
 */
function cliBundlePlugin() {
  return {
    name: 'agent-pipeline-cli-bundle',
    async resolveId(source, importer) {
      if (WORKER_PACKAGES.test(source)) this.error(`${importer} imports ${source}, which only a worker may load: import it from a module in WORKER_ENTRIES (scripts/bundle-cli.js), loaded when a worker command runs`);
      if (!importer || !source.startsWith('.')) return null;
      const file = path.resolve(path.dirname(importer), source);
      if (!WORKER_ENTRIES.includes(file)) return null;
      return { id: relativeSpecifier(file), external: true };
    },
    transform(code, id) {
      if (!id.startsWith(DIST + path.sep) || !code.includes('import.meta.url')) return null;
      return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(relativeSpecifier(id))}, import.meta.url).href`), map: null };
    },
  };
}

/** `file` as a specifier relative to the bundle's folder, where every chunk is written. */
function relativeSpecifier(file) {
  return path.relative(BUNDLE_DIR, file).split(path.sep).join('/');
}

/** Which packages each chunk holds, as {"client.js": ["commander", …]}: what loading a chunk loads (test/integration/cli-lazy-modules.test.ts). */
const PACKAGES_FILE = 'packages.json';

/**
 * The node_modules packages bundled into each chunk, by chunk file name.
 * @param {import('rolldown').RolldownOutput['output']} output
 */
function packagesByChunk(output) {
  /** @type {Record<string, string[]>} */
  const packages = {};
  for (const chunk of output) {
    if (chunk.type !== 'chunk') continue;
    const names = chunk.moduleIds.map((id) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(id)?.[1]).filter((name) => name !== undefined);
    packages[chunk.fileName] = [...new Set(names)].sort();
  }
  return packages;
}

rmSync(BUNDLE_DIR, { recursive: true, force: true });
const bundle = await rolldown({
  input: { client: path.join(DIST, 'client.js') },
  platform: 'node',
  plugins: [cliBundlePlugin()],
  logLevel: 'warn',
});
const { output } = await bundle.write({
  dir: BUNDLE_DIR,
  format: 'esm',
  entryFileNames: '[name].js',
  chunkFileNames: '[name]-[hash].js',
  // Class and function names stay as written: errors are told apart by name (cli/errors.ts), and so are some of the SDK's.
  keepNames: true,
  // No comments: they would name the build machine's folders (the path of each bundled module).
  comments: false,
});
await bundle.close();
writeFileSync(path.join(BUNDLE_DIR, PACKAGES_FILE), `${JSON.stringify(packagesByChunk(output), null, 1)}\n`);
process.stdout.write(`command line bundled into ${path.relative(ROOT, BUNDLE_DIR)}/ (${output.length} chunks)\n`);
