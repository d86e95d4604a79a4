#!/usr/bin/env node
// @ts-check
/**
 * Bundles the command line (`npm run build`, after tsc): dist/client.js and the pure-JavaScript packages it loads into
 * one folder of ES modules, dist/cli-bundle/, which bin/agent-pipeline.js runs. A command then loads a few files
 * instead of six hundred (the Temporal client alone is about 300 CommonJS modules, each found, read, scanned for its
 * exports and wrapped): `status` or `list` start in about two thirds of the CPU time (docs/performance.md, "Command
 * start-up"). The commands that run a worker (`worker`, `dev`, `demo`) and `node dist/worker.js` run a second bundle,
 * dist/worker-bundle/, which leaves the Temporal SDK in node_modules. The unbundled dist/ stays what the library's
 * exports run.
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
 * The modules that run a worker in this process. They stay outside the command line's bundle (imported from dist/ as
 * they are), and bin/agent-pipeline.js runs the commands that load them (`worker`, `dev`, `demo`) from the worker
 * bundle (below): @temporalio/worker (a native runtime, workflow threads it starts from its own files) cannot be
 * bundled, and a worker must share one copy of the Temporal SDK with it (the activity context, the failure and payload
 * classes), which the command line's bundle holds a copy of.
 */
const WORKER_ENTRIES = ['worker/run-worker.js', 'worker/health-file.js', 'cli/local-stack.js'].map((file) => path.join(DIST, file));

/** Packages only a worker loads: a bundled module that imports one would load a second copy of the SDK. */
const WORKER_PACKAGES = /^@temporalio\/(worker|activity|core-bridge|testing)(\/|$)/;

/**
 * The bundle of the commands that run a worker in this process (`worker`, `dev`, `demo`) and of `node dist/worker.js`
 * (its `run-worker.js`): our modules and the pure-JavaScript packages they load (zod, execa, the Anthropic SDK, yaml,
 * commander), about 800 ES modules a worker loaded one by one. A worker starts in ~0.35 fewer CPU-seconds (1.74 -> 1.40,
 * docs/performance.md). Left in node_modules, loaded as they are: the Temporal SDK (one copy, which @temporalio/worker's
 * native runtime and the workflow threads it starts from its own files share), the packages whose objects meet the
 * SDK's (gRPC, OpenTelemetry's global API) or that a setting loads (prom-client, the S3 client), and the packages we
 * only locate on disk (claude-code, sandbox-runtime).
 */
const WORKER_BUNDLE_DIR = path.join(DIST, 'worker-bundle');
const WORKER_EXTERNAL = /^(@temporalio|@grpc|@opentelemetry|prom-client|@aws-sdk|@anthropic-ai\/claude-code|@anthropic-ai\/sandbox-runtime)(\/|$)/;

/**
 * Gives each of our modules the `import.meta.url` of its own file in dist/ (which the package still ships), so that
 * paths relative to a module (the demo's folder, the package root, the compiled converters, the workflow bundles)
 * resolve as they do unbundled, whichever chunk of the bundle in `outDir` the module lands in.
 * @param {string} outDir
 * @returns {import('rolldown').Plugin}
 */
function ownModuleUrlsPlugin(outDir) {
  return {
    name: 'agent-pipeline-module-urls',
    transform(code, id) {
      if (!id.startsWith(DIST + path.sep) || !code.includes('import.meta.url')) return null;
      return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(relativeSpecifier(outDir, id))}, import.meta.url).href`), map: null };
    },
  };
}

/**
 * Keeps the worker entries out of the command line's bundle and refuses worker packages there.
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
      return { id: relativeSpecifier(BUNDLE_DIR, file), external: true };
    },
  };
}

/** `file` as a specifier relative to `outDir`, where every chunk of a bundle is written. */
function relativeSpecifier(outDir, file) {
  return path.relative(outDir, file).split(path.sep).join('/');
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

/**
 * Writes a bundle into `outDir` (emptied first) with the list of packages each chunk holds.
 * @param {string} outDir
 * @param {import('rolldown').InputOptions} options
 */
async function writeBundle(outDir, options) {
  rmSync(outDir, { recursive: true, force: true });
  const bundle = await rolldown({ platform: 'node', logLevel: 'warn', ...options, plugins: [ownModuleUrlsPlugin(outDir), ...(options.plugins ?? [])] });
  const { output } = await bundle.write({
    dir: outDir,
    format: 'esm',
    entryFileNames: '[name].js',
    chunkFileNames: '[name]-[hash].js',
    // Class and function names stay as written: errors are told apart by name (cli/errors.ts), and so are some of the SDK's.
    keepNames: true,
    // No comments: they would name the build machine's folders (the path of each bundled module).
    comments: false,
  });
  await bundle.close();
  writeFileSync(path.join(outDir, PACKAGES_FILE), `${JSON.stringify(packagesByChunk(output), null, 1)}\n`);
  process.stdout.write(`${path.relative(ROOT, outDir)}/ written (${output.length} chunks)\n`);
}

await writeBundle(BUNDLE_DIR, { input: { client: path.join(DIST, 'client.js') }, plugins: [cliBundlePlugin()] });
await writeBundle(WORKER_BUNDLE_DIR, {
  input: { client: path.join(DIST, 'client.js'), 'run-worker': path.join(DIST, 'worker', 'run-worker.js') },
  external: (id) => WORKER_EXTERNAL.test(id),
});
