import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

/*
 * One supported Node (issue 32): package.json's `engines`, the Dockerfile's NODE_VERSION, the Node `.ci/run` installs
 * when the machine's is older, and `@types/node` all say Node 22, and the floor covers what the pinned Claude Code
 * CLI declares. A bump of one of them without the others fails here.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string): string => readFileSync(path.join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }; devDependencies: Record<string, string> };

type Version = [number, number, number];
/** `>=22.13` → [22, 13, 0]; only the `>=` form is used, so that npm and `.ci/run` read the floor alike. */
function floorOf(range: string): Version {
  const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim());
  if (!match) throw new Error(`engines.node ${JSON.stringify(range)} is not of the form >=MAJOR[.MINOR[.PATCH]]`);
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}
const parse = (version: string): Version => version.split('.').map(Number) as Version;
const atLeast = (have: Version, floor: Version): boolean => (have[0] - floor[0] || have[1] - floor[1] || have[2] - floor[2]) >= 0;

function assigned(file: string, pattern: RegExp): string {
  const match = pattern.exec(read(file));
  if (!match) throw new Error(`${file} does not set ${pattern.source}`);
  return match[1]!;
}

describe('the supported Node', () => {
  const floor = floorOf(pkg.engines.node);
  const docker = assigned('Dockerfile', /^ARG NODE_VERSION=(\S+)$/m);
  const ci = assigned('.ci/run', /^NODE_VERSION=(\S+)$/m);

  test('is Node 22 everywhere: engines, the Dockerfile, CI and @types/node', () => {
    expect(floor[0]).toBe(22);
    expect(docker).toBe(ci);
    expect(docker).toMatch(/^22\.\d+\.\d+$/);
    expect(atLeast(parse(ci), floor), `${ci} is below engines.node ${pkg.engines.node}`).toBe(true);
    expect(pkg.devDependencies['@types/node']).toMatch(/^22\./);
  });

  test('covers what the pinned Claude Code CLI requires', () => {
    const require = createRequire(import.meta.url);
    const claude = require('@anthropic-ai/claude-code/package.json') as { engines?: { node?: string } };
    const needed = floorOf(claude.engines?.node ?? '>=0');
    expect(atLeast(floor, needed), `engines.node ${pkg.engines.node} is below Claude Code's ${claude.engines?.node}`).toBe(true);
  });
});
