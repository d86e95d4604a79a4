import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/** A module past this has grown more than one job (issue 32; docs/architecture.md). @unit lines */
const MAX_MODULE_LINES = 300;

/** Every `.ts` file under `dir`, relative to the project. */
function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(PROJECT_ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.posix.join(dir, file.split(path.sep).join('/')));
}

describe('module size', () => {
  it(`keeps every module of src/ within ${MAX_MODULE_LINES} lines`, () => {
    const files = sourceFiles('src');
    expect(files.length).toBeGreaterThan(100);
    const over = files
      .map((file) => ({ file, lines: readFileSync(path.join(PROJECT_ROOT, file), 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_MODULE_LINES)
      .map(({ file, lines }) => `${file}: ${lines} lines; split it along its seams into modules of one job each`);
    expect(over).toEqual([]);
  });
});
