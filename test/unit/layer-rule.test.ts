import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

// Type-aware parsing is off (the probes replace files' contents); the import rules need no types.
const eslint = new ESLint({
  cwd: PROJECT_ROOT,
  overrideConfig: {
    languageOptions: { parserOptions: { projectService: false, project: null } },
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
});

/** Lints `code` as if it were the file `file` and returns the messages of the import-x rules. */
async function importProblems(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${PROJECT_ROOT}${file}` });
  return result.messages.filter((m) => m.ruleId?.startsWith('import-x/')).map((m) => `${m.ruleId}: ${m.message}`);
}

describe('the lint rule that keeps imports pointing down the layers', () => {
  it('rejects an import from a higher layer, and names the layers the file may not use', async () => {
    const problems = await importProblems('src/pipeline/probe.ts', "import { createActivities } from '../activities/index.js';\nexport const probe = createActivities;\n");
    expect(problems).toEqual([expect.stringContaining('import-x/no-restricted-paths: Unexpected path "../activities/index.js"')]);
    expect(problems[0]).toContain('pipeline/ may import only the layers below it');
  });

  it('rejects a type-only import from a higher layer too, workflows importing activities included', async () => {
    const typeImport = "import type { RunStageDependencies } from '../activities/run-stage/attempt-setup.js';\nexport type Probe = RunStageDependencies;\n";
    expect(await importProblems('src/config.ts', typeImport.replaceAll('../', './'))).toHaveLength(1);
    expect(await importProblems('src/workflows/probe.ts', typeImport)).toEqual([expect.stringContaining('workflows/ may import only the layers below it')]);
    expect(await importProblems('src/contracts/probe.ts', typeImport)).toEqual([expect.stringContaining('contracts/ may import only the layers below it')]);
  });

  it('lets only library/testing.ts import dev/', async () => {
    const code = "import { startModelServer } from '../dev/model-server.js';\nexport const probe = startModelServer;\n";
    expect(await importProblems('src/library/probe.ts', code)).toEqual([expect.stringContaining('Only library/testing.ts may import dev/')]);
    expect(await importProblems('src/library/testing.ts', code)).toEqual([]);
  });

  it('allows imports from lower layers', async () => {
    const code = "import { loadConfig } from '../config.js';\nimport { parsePipeline } from '../pipeline/parse.js';\nexport const probe = [loadConfig, parsePipeline];\n";
    expect(await importProblems('src/activities/probe.ts', code)).toEqual([]);
  });

  it('rejects an import cycle', async () => {
    // schema-walk.ts imports schema.ts; schema.ts importing it back closes a circle.
    const code = "import { schemaAt } from './schema-walk.js';\nexport const probe = schemaAt;\n";
    expect(await importProblems('src/pipeline/schema.ts', code)).toEqual(['import-x/no-cycle: Dependency cycle detected']);
  });
});
