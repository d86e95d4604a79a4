import { execa } from 'execa';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, inject, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';
import { TEST_SANDBOX_MODE } from '../helpers/sandbox-host.js';
import { CLI, CLI_FIXTURES } from './cli-helpers.js';

/*
 * Every command a person or a test runs pays for the modules the CLI loads. A command loads what it uses when its
 * action runs: `--help` and usage errors load the command line alone, `validate` the parser without the Temporal
 * client, a command that connects the client without the parser's file checks. The OpenTelemetry SDK is loaded only
 * when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT), and the worker's native runtime only by the commands that run one;
 * a worker loads the SDK and the metrics registry only when tracing or metrics (AGENT_PIPELINE_METRICS) are on. Every
 * command but those that run a worker runs from the bundle (dist/cli-bundle/, scripts/bundle-cli.js), which lists the
 * packages each of its chunks holds.
 */

const BUNDLE_DIR = path.join(PROJECT_ROOT, 'dist', 'cli-bundle');
/** The bundle of the commands that run a worker (scripts/bundle-cli.js), which leaves the Temporal SDK in node_modules. */
const WORKER_BUNDLE_DIR = path.join(PROJECT_ROOT, 'dist', 'worker-bundle');

/** What `agent-pipeline ARGS` loaded: packages by name, and whether each came from node_modules or from a bundle. */
interface Loaded {
  /** Every package, from node_modules or inside a bundle chunk it loaded. */
  packages: Set<string>;
  /** The packages loaded from node_modules. */
  unbundled: Set<string>;
  /** The command line bundle's chunks it loaded. */
  chunks: Set<string>;
  /** The worker bundle's chunks it loaded. */
  workerChunks: Set<string>;
}

/** The chunks of the bundle in `dir` among `urls`, and the packages they hold (the bundle's packages.json). */
async function chunksLoaded(urls: string[], dir: string): Promise<{ chunks: Set<string>; packages: string[] }> {
  const chunks = new Set(urls.filter((url) => url.startsWith(`file://${dir}/`)).map((url) => path.basename(url)));
  const inBundle = chunks.size === 0 ? {} : (JSON.parse(await readFile(path.join(dir, 'packages.json'), 'utf8')) as Record<string, string[]>);
  return { chunks, packages: [...chunks].flatMap((chunk) => inBundle[chunk] ?? []) };
}

/**
 * The packages `agent-pipeline ARGS` loads, CommonJS or ESM (Node's module hooks see every load), from node_modules
 * or inside the bundle's chunks. With `until`, a command that runs until stopped (a worker) gets SIGTERM once its
 * output shows that text.
 */
async function packagesLoaded(args: string[], env: NodeJS.ProcessEnv = {}, until?: string): Promise<Loaded> {
  const probe = `
    import { registerHooks } from 'node:module';
    const urls = new Set();
    registerHooks({ resolve(specifier, context, next) {
      const resolved = next(specifier, context);
      urls.add(resolved.url);
      return resolved;
    } });
    process.argv = [process.argv[0], ${JSON.stringify(CLI)}, ...process.argv.slice(2)];
    let printed = false;
    const print = () => { if (!printed) process.stderr.write('\\nLOADED ' + JSON.stringify([...urls]) + '\\n'); printed = true; };
    process.on('exit', print);
    // A worker stopped by SIGTERM drains and may end by the signal, with no exit event: the list as it was then.
    process.prependListener('SIGTERM', print);
    await import(${JSON.stringify(CLI)});`;
  // A file, not \`node -e\`: the CLI's argument parser reads arguments differently under -e.
  const dir = await mkdtemp(path.join(tmpdir(), 'cli-modules-'));
  const file = path.join(dir, 'probe.mjs');
  await writeFile(file, probe);
  const child = execa('node', [file, ...args], { env: { PATH: process.env.PATH, ...env }, extendEnv: false, reject: false, all: true, timeout: 90_000 });
  if (until) {
    let output = '';
    child.all?.on('data', (chunk: Buffer) => {
      output += String(chunk);
      if (output.includes(until)) child.kill('SIGTERM');
    });
  }
  const result = await child.finally(() => rm(dir, { recursive: true, force: true }));
  const line = result.stderr.split('\n').find((l) => l.startsWith('LOADED '));
  if (!line) throw new Error(`no module list: ${result.stderr.slice(-2000)}`);
  const urls = JSON.parse(line.slice('LOADED '.length)) as string[];
  const unbundled = new Set(urls.map((url) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1]).filter((name) => name !== undefined));
  const cli = await chunksLoaded(urls, BUNDLE_DIR);
  const worker = await chunksLoaded(urls, WORKER_BUNDLE_DIR);
  return { packages: new Set([...unbundled, ...cli.packages, ...worker.packages]), unbundled, chunks: cli.chunks, workerChunks: worker.chunks };
}

describe('what a command loads', () => {
  const HEAVY = ['@opentelemetry/sdk-trace-base', '@opentelemetry/sdk-metrics', '@temporalio/interceptors-opentelemetry', '@temporalio/worker'];

  test('--help and a usage error load the command line alone', async () => {
    for (const args of [['--help'], ['start', '--help'], ['list', '--status', 'sleeping']]) {
      const { packages } = await packagesLoaded(args);
      expect([...packages], args.join(' ')).toEqual(['commander']);
    }
  });

  test('validate loads the parser, and neither the Temporal client, the OpenTelemetry SDK nor the worker', async () => {
    const { packages } = await packagesLoaded(['validate', path.join(CLI_FIXTURES, 'basic.yaml')]);
    expect(packages.has('yaml')).toBe(true);
    for (const heavy of [...HEAVY, '@temporalio/client', '@grpc/grpc-js', '@temporalio/proto', 'execa']) expect(packages.has(heavy), `${heavy} loaded`).toBe(false);
  });

  test('a worker loads neither the OpenTelemetry SDK nor the metrics registry while tracing and metrics are off', async () => {
    const workspaces = await mkdtemp(path.join(tmpdir(), 'lazy-worker-'));
    const env = {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      AGENT_PIPELINE_TASK_QUEUE: `lazy-worker-${Math.random().toString(36).slice(2, 8)}`,
      AGENT_PIPELINE_WORKSPACES: workspaces,
      AGENT_PIPELINE_SANDBOX: TEST_SANDBOX_MODE,
      ANTHROPIC_API_KEY: 'sk-test-lazy-worker',
    };
    try {
      const loaded = await packagesLoaded(['worker'], env, 'agent-pipeline worker polling');
      // From the worker bundle, with the Temporal SDK as it is in node_modules: one copy, shared with @temporalio/worker
      // (the command line's bundle holds a copy of the client).
      expect(loaded.workerChunks.has('client.js')).toBe(true);
      expect([...loaded.chunks]).toEqual([]);
      for (const sdk of ['@temporalio/worker', '@temporalio/client', '@temporalio/common']) expect(loaded.unbundled.has(sdk), `${sdk} from node_modules`).toBe(true);
      // Our modules' packages come bundled, not as the ~800 files a worker loaded one by one.
      for (const bundled of ['zod', 'execa', '@anthropic-ai/sdk']) expect(loaded.unbundled.has(bundled), `${bundled} from node_modules`).toBe(false);
      // telemetry.test.ts runs a worker with both on.
      for (const heavy of ['@opentelemetry/sdk-trace-base', '@temporalio/interceptors-opentelemetry', 'prom-client']) expect(loaded.packages.has(heavy), `${heavy} loaded`).toBe(false);
    } finally {
      await rm(workspaces, { recursive: true, force: true });
    }
  });

  test("worker --health-check, which a container runs every 15 s, loads the command line alone, not the worker's modules", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'lazy-health-'));
    try {
      const { packages } = await packagesLoaded(['worker', '--health-check'], { AGENT_PIPELINE_HEALTH_FILE: path.join(dir, 'worker.health') });
      expect([...packages]).toEqual(['commander']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a command that connects loads the OpenTelemetry SDK only when tracing is on', async () => {
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress') };
    const plain = await packagesLoaded(['status', 'no-such-run-lazy-modules'], env);
    expect(plain.packages.has('@temporalio/client')).toBe(true);
    for (const heavy of [...HEAVY, 'execa']) expect(plain.packages.has(heavy), `${heavy} loaded`).toBe(false);
    // From the bundle: nothing from node_modules, where the client's 600 modules each cost a look-up and a read.
    expect([...plain.unbundled]).toEqual([]);
    // Nothing listens there: the spans are lost, which is not what this test is about.
    const traced = await packagesLoaded(['status', 'no-such-run-lazy-modules'], { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    expect(traced.packages.has('@opentelemetry/sdk-trace-base')).toBe(true);
    expect(traced.packages.has('@temporalio/interceptors-opentelemetry')).toBe(true);
  });
});
