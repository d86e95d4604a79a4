import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

// The probe files do not exist on disk, so type-aware parsing is off; the import rule needs no types.
const eslint = new ESLint({
  cwd: PROJECT_ROOT,
  overrideConfig: {
    languageOptions: { parserOptions: { projectService: false, project: null } },
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
});

async function restrictedImports(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${PROJECT_ROOT}${file}` });
  return result.messages.filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports').map((m) => m.message);
}

describe('the lint rule that keeps I/O out of deterministic code', () => {
  it('rejects Node, execa and the Anthropic SDK in workflows and pipeline code', async () => {
    const code = "import { readFile } from 'node:fs/promises';\nimport { execa } from 'execa';\nimport Anthropic from '@anthropic-ai/sdk';\nexport const all = [readFile, execa, Anthropic];\n";
    expect(await restrictedImports('src/workflows/probe.ts', code)).toHaveLength(3);
    expect(await restrictedImports('src/pipeline/probe.ts', code)).toHaveLength(3);
  });

  it('allows them in activities', async () => {
    expect(await restrictedImports('src/activities/probe.ts', "import { execa } from 'execa';\nexport const run = execa;\n")).toEqual([]);
  });
});
