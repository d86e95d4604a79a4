import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { SLOW_FILES } from '../helpers/slow-first-sequencer.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('the slow-first order of npm test', () => {
  // A renamed or split file would silently lose its early start, and the run its overlap (issue 32).
  test('names only test files that exist, each once', () => {
    expect(SLOW_FILES.filter((file) => !existsSync(path.join(ROOT, file)))).toEqual([]);
    expect(new Set(SLOW_FILES).size).toBe(SLOW_FILES.length);
  });
});
