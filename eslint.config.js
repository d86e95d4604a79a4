// @ts-check
import { readdirSync } from 'node:fs';
import path from 'node:path';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import { LAYERS } from './scripts/layers.js';

/** Modules that do I/O; workflow code runs in Temporal's deterministic sandbox and pipeline code is imported by it. */
const IO_MODULES = {
  patterns: [
    { group: ['node:*'], message: 'No Node I/O in workflow or pipeline code: it must stay deterministic (see docs/architecture.md).' },
    { group: ['execa', '@anthropic-ai/sdk', '@temporalio/activity', '@temporalio/worker', '@temporalio/client'], message: 'Workflow and pipeline code may only use @temporalio/workflow, @temporalio/common and pure modules.' },
    { group: ['fs', 'fs/*', 'path', 'child_process', 'os', 'http', 'https', 'net', 'crypto'], message: 'No Node I/O in workflow or pipeline code.' },
  ],
};


// A file or folder of src/ outside every layer would escape the layer rule: name it here, or lint stops.
const unplaced = readdirSync(path.join(import.meta.dirname, 'src')).filter(
  (entry) => !LAYERS.some((layer) => layer.paths.includes(`src/${entry}`)),
);
if (unplaced.length > 0) {
  throw new Error(`eslint.config.js: put ${unplaced.map((entry) => `src/${entry}`).join(', ')} in a layer of LAYERS (see docs/architecture.md)`);
}

/** One zone per layer: nothing in it may import from a layer above it. */
const LAYER_ZONES = LAYERS.slice(0, -1).map((layer, index) => {
  const forbidden = LAYERS.slice(index + 1);
  return {
    target: layer.paths,
    from: forbidden.flatMap((upper) => upper.paths),
    message: `${layer.name} may import only the layers below it, not ${forbidden.map((upper) => upper.name).join(', ')} (see docs/architecture.md).`,
  };
});

/** The library loads without its test tooling: only library/testing.ts (`agent-pipeline/testing`) may import dev/. */
const LIBRARY_WITHOUT_DEV = {
  target: 'src/library/**/!(testing).ts',
  from: ['src/dev'],
  message: 'Only library/testing.ts may import dev/: `import "agent-pipeline"` must not load the dev tooling.',
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.agent-pipeline/**', 'bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      // Sources import each other with `.js` specifiers (ESM); the resolver maps them back to the `.ts` files.
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'], extensionAlias: { '.js': ['.ts', '.js'] } })],
    },
    rules: {
      'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: [...LAYER_ZONES, LIBRARY_WITHOUT_DEV] }],
      // Loops through type imports too are found by scripts/check-imports.js (part of `npm run lint`), which this rule skips.
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Command wiring is a list of commander options and actions, read top to bottom.
    files: ['src/cli/commands/**/*.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    files: ['src/workflows/**/*.ts', 'src/contracts/**/*.ts', 'src/pipeline/**/*.ts', 'src/failure-types.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', IO_MODULES] },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
