#!/usr/bin/env node
// The published entry point: the compiled client. A package from `npm pack` carries it (`prepack` builds); a clone
// builds it with `npm run build` (`npm start` and `npm test` build first).
import { existsSync } from 'node:fs';

const client = new URL('../dist/client.js', import.meta.url);
if (!existsSync(client)) {
  process.stderr.write('agent-pipeline is not built yet: run `npm run build` in its folder first\n');
  process.exit(2);
}
await import(client.href);
