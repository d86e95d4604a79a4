import { execa } from 'execa';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, inject, test } from 'vitest';
import { CLI, CLI_FIXTURES } from './cli-helpers.js';

/*
 * Every command a person or a test runs pays for the modules the CLI loads. The OpenTelemetry SDK (about 270 of the
 * 650 modules a command loaded) is loaded only when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT), and the worker's
 * native runtime only by the commands that run one.
 */

/** The node_modules packages `agent-pipeline ARGS` loads, CommonJS or ESM, by name (Node's module hooks see every load). */
async function packagesLoaded(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Set<string>> {
  const probe = `
    import { registerHooks } from 'node:module';
    const names = new Set();
    registerHooks({ resolve(specifier, context, next) {
      const resolved = next(specifier, context);
      const name = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(resolved.url)?.[1];
      if (name) names.add(name);
      return resolved;
    } });
    process.argv = [process.argv[0], ${JSON.stringify(CLI)}, ...process.argv.slice(2)];
    process.on('exit', () => process.stderr.write('\\nLOADED ' + JSON.stringify([...names]) + '\\n'));
    await import(${JSON.stringify(CLI)});`;
  // A file, not \`node -e\`: the CLI's argument parser reads arguments differently under -e.
  const dir = await mkdtemp(path.join(tmpdir(), 'cli-modules-'));
  const file = path.join(dir, 'probe.mjs');
  await writeFile(file, probe);
  const result = await execa('node', [file, ...args], { env: { PATH: process.env.PATH, ...env }, extendEnv: false, reject: false }).finally(() => rm(dir, { recursive: true, force: true }));
  const line = result.stderr.split('\n').find((l) => l.startsWith('LOADED '));
  if (!line) throw new Error(`no module list: ${result.stderr.slice(-2000)}`);
  return new Set(JSON.parse(line.slice('LOADED '.length)) as string[]);
}

describe('what a command loads', () => {
  const HEAVY = ['@opentelemetry/sdk-trace-base', '@opentelemetry/sdk-metrics', '@temporalio/interceptors-opentelemetry', '@temporalio/worker'];

  test('validate loads neither the OpenTelemetry SDK nor the worker', async () => {
    const loaded = await packagesLoaded(['validate', path.join(CLI_FIXTURES, 'basic.yaml')]);
    expect(loaded.has('yaml')).toBe(true);
    for (const heavy of HEAVY) expect(loaded.has(heavy), `${heavy} loaded`).toBe(false);
  });

  test('a command that connects loads the OpenTelemetry SDK only when tracing is on', async () => {
    const env = { TEMPORAL_ADDRESS: inject('temporalAddress') };
    const plain = await packagesLoaded(['status', 'no-such-run-lazy-modules'], env);
    expect(plain.has('@temporalio/client')).toBe(true);
    for (const heavy of HEAVY) expect(plain.has(heavy), `${heavy} loaded`).toBe(false);
    // Nothing listens there: the spans are lost, which is not what this test is about.
    const traced = await packagesLoaded(['status', 'no-such-run-lazy-modules'], { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    expect(traced.has('@opentelemetry/sdk-trace-base')).toBe(true);
    expect(traced.has('@temporalio/interceptors-opentelemetry')).toBe(true);
  });
});
