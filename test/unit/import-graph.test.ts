import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

const CHECK = path.join(PROJECT_ROOT, 'scripts', 'check-imports.js');
const made: string[] = [];
afterEach(() => made.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A repository root holding these files (paths under src/), for the check to read. */
function sourceTree(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), 'import-graph-'));
  made.push(root);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

function checkImports(root: string): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [CHECK, root], { encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('the import-graph check (npm run lint), type imports included', () => {
  it('finds no loop and no upward import in src/', () => {
    const { status, output } = checkImports(PROJECT_ROOT);
    expect(output).toContain('no loop, no upward import');
    expect(status).toBe(0);
  });

  it('fails on a loop closed by type-only imports, naming its files', () => {
    const root = sourceTree({
      'src/pipeline/a.ts': "import type { B } from './b.js';\nexport type A = { b?: B };\n",
      'src/pipeline/b.ts': "import type { A } from './a.js';\nexport type B = { a?: A };\n",
      'src/pipeline/c.ts': "import type { A } from './a.js';\nexport type C = A;\n",
    });
    const { status, output } = checkImports(root);
    expect(status).toBe(1);
    expect(output).toContain('import loop (type imports included) through 2 files: src/pipeline/a.ts, src/pipeline/b.ts');
    expect(output).not.toContain('c.ts');
  });

  it('fails on a type import that points up the layers (a workflow taking an activity type)', () => {
    const root = sourceTree({
      'src/activities/run-stage.ts': 'export interface StageAttemptInput { runId: string }\n',
      'src/workflows/stage-runner.ts': "import type { StageAttemptInput } from '../activities/run-stage.js';\nexport type Input = StageAttemptInput;\n",
    });
    const { status, output } = checkImports(root);
    expect(status).toBe(1);
    expect(output).toContain('upward import: src/workflows/stage-runner.ts → src/activities/run-stage.ts (workflows/ may not import activities/)');
  });

  it('sees `export … from` and `import()` as imports too', () => {
    const root = sourceTree({
      'src/pipeline/a.ts': "export type { B } from './b.js';\n",
      'src/pipeline/b.ts': "export type B = typeof import('./a.js');\n",
    });
    expect(checkImports(root).output).toContain('import loop (type imports included) through 2 files');
  });
});
