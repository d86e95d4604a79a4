// @ts-check
/**
 * The layers of src/, bottom up: each may import only the layers below it (and itself), type imports included.
 * eslint.config.js and scripts/check-imports.js both read this list; docs/architecture.md says why each folder and
 * top-level file sits where it does. Paths are relative to the repository root.
 */
export const LAYERS = [
  { name: 'the leaves', paths: ['src/errors.ts', 'src/logging.ts', 'src/failure-types.ts', 'src/terminal-text.ts', 'src/files'] },
  { name: 'pipeline/', paths: ['src/pipeline'] },
  { name: 'contracts/', paths: ['src/contracts'] },
  { name: 'workflows/', paths: ['src/workflows'] },
  { name: 'store/', paths: ['src/store'] },
  { name: 'bundle/, telemetry/, trust/, codec/ and config.ts', paths: ['src/bundle', 'src/telemetry', 'src/trust', 'src/codec', 'src/config.ts', 'src/grpc-errors.ts'] },
  { name: 'activities/', paths: ['src/activities'] },
  { name: 'the worker assembly (worker/)', paths: ['src/worker'] },
  { name: 'dev/', paths: ['src/dev'] },
  { name: 'library/', paths: ['src/library'] },
  { name: 'cli/', paths: ['src/cli'] },
  { name: 'the entry points', paths: ['src/worker.ts', 'src/client.ts'] },
];
