// @ts-check
import tseslint from 'typescript-eslint';

/** Modules that do I/O; workflow code runs in Temporal's deterministic sandbox and pipeline code is imported by it. */
const IO_MODULES = {
  patterns: [
    { group: ['node:*'], message: 'No Node I/O in workflow or pipeline code: it must stay deterministic (see DESIGN.md).' },
    { group: ['execa', '@anthropic-ai/sdk', '@temporalio/activity', '@temporalio/worker', '@temporalio/client'], message: 'Workflow and pipeline code may only use @temporalio/workflow, @temporalio/common and pure modules.' },
    { group: ['fs', 'fs/*', 'path', 'child_process', 'os', 'http', 'https', 'net', 'crypto'], message: 'No Node I/O in workflow or pipeline code.' },
    { group: ['**/activities/*', '!**/activities/index.js'], message: 'Workflows import activity types only, through activities/index.js.', allowTypeImports: true },
  ],
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
    files: ['src/workflows/**/*.ts', 'src/pipeline/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', IO_MODULES] },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
