#!/usr/bin/env node
// The published entry point: the compiled client. A package from `npm pack` carries it (`prepack` builds); a clone
// builds it with `npm run build` (`npm start` and `npm test` build first).
import { existsSync, statSync } from 'node:fs';
import module from 'node:module';

// Node keeps the compiled code of the modules loaded from here on disk (its temp folder) and reuses it: a command
// starts in about three quarters of the CPU time (0.44 s instead of 0.58 s for `validate`, measured on Node 22).
module.enableCompileCache?.();

const client = new URL('../dist/client.js', import.meta.url);
if (!existsSync(client)) {
  process.stderr.write('agent-pipeline is not built yet: run `npm run build` in its folder first\n');
  process.exit(2);
}
await import(entryFor(process.argv[2]).href);

/**
 * The bundled command line (dist/cli-bundle/, scripts/bundle-cli.js: the same code in a few dozen files instead of
 * hundreds of modules; a command that connects starts in about two thirds of the CPU time), or, for the commands that
 * run a worker in this process, the worker bundle (dist/worker-bundle/: the Temporal SDK stays in node_modules, one copy
 * shared with @temporalio/worker); or the compiled modules as they are when the bundle is older than the compiled
 * client (`tsc` alone after the last `npm run build`).
 */
function entryFor(command) {
  const worker = command === 'worker' || command === 'dev' || command === 'demo';
  const bundle = new URL(worker ? '../dist/worker-bundle/client.js' : '../dist/cli-bundle/client.js', import.meta.url);
  const built = statSync(bundle, { throwIfNoEntry: false });
  return built && built.mtimeMs >= statSync(client).mtimeMs ? bundle : client;
}
