import { describe, expect, test } from 'vitest';
import { relativizeInlineSourceMap } from '../../src/dev/bundle-source-map.js';

function withMap(code: string, map: object): string {
  return `${code}\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

function readMap(code: string): { sources: string[]; sourcesContent: string[]; sourceRoot: string } {
  return JSON.parse(Buffer.from(code.split('base64,').at(-1)!, 'base64').toString()) as never;
}

describe('the workflow bundle\'s inline source map', () => {
  test('names no absolute path: own sources relative to the bundle, dependencies from their node_modules folder', () => {
    const code = withMap('console.log(1);', {
      version: 3,
      sources: ['/build/box/src/workflows/pipeline.ts', '/elsewhere/shared/node_modules/@temporalio/common/src/failure.ts', 'webpack/bootstrap', 'ignored|/elsewhere/shared/node_modules/@temporalio/workflow/lib|x'],
      sourcesContent: ['a', 'b', 'c', 'require("/build/box/dist/workflows/index.js"); require("/elsewhere/shared/node_modules/x/i.js")'],
      mappings: 'AAAA',
    });
    const out = relativizeInlineSourceMap(code, '/build/box', '/build/box/dist', ['/elsewhere/shared']);
    expect(out.startsWith('console.log(1);\n//# sourceMappingURL=')).toBe(true);
    expect(out).not.toContain('/build/box');
    const map = readMap(out);
    expect(map.sources).toEqual(['../src/workflows/pipeline.ts', '../node_modules/@temporalio/common/src/failure.ts', 'webpack/bootstrap', 'ignored|../node_modules/@temporalio/workflow/lib|x']);
    expect(map.sourcesContent).toEqual(['a', 'b', 'c', 'require("../dist/workflows/index.js"); require("../node_modules/x/i.js")']);
    expect(out).not.toContain('/elsewhere/shared');
    expect(map.sourceRoot).toBe('');
  });

  test('code without an inline map is left as it is', () => {
    expect(relativizeInlineSourceMap('x();\n', '/a', '/a/dist')).toBe('x();\n');
  });
});
