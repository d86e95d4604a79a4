import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  RUN_LIST_STATUSES,
  type AgentPipelineError,
  type AgentPipelineErrorCode,
  type FollowOptions,
  type RunListItem,
  type RunListStatus,
} from '../../src/library/index.js';
import { buildListQuery } from '../../src/library/list-runs.js';

/* What a TypeScript user of the library sees: lists where the docs show lists, literal unions the compiler checks. */

describe('the library\'s types', () => {
  it('lists the run statuses list() filters on, each once, in one spelling', () => {
    expect(RUN_LIST_STATUSES).toEqual(['running', 'completed', 'failed', 'cancelled', 'terminated', 'timed_out', 'waiting', 'blocked']);
    expectTypeOf<RunListStatus>().toEqualTypeOf<'running' | 'completed' | 'failed' | 'cancelled' | 'terminated' | 'timed_out' | 'waiting' | 'blocked'>();
    // Temporal's spellings still filter as the status they mean.
    expect(buildListQuery({ status: 'timed-out' as RunListStatus })).toBe(buildListQuery({ status: 'timed_out' }));
    expect(buildListQuery({ status: 'canceled' as RunListStatus })).toBe(buildListQuery({ status: 'cancelled' }));
    expect(() => buildListQuery({ status: 'sleeping' as RunListStatus })).toThrow('expected one of running, completed, failed, cancelled, terminated, timed_out, waiting, blocked');
  });

  it('types statuses and error codes as literal unions, and exports FollowOptions', () => {
    expectTypeOf<RunListItem['status']>().toEqualTypeOf<RunListStatus | 'continued_as_new'>();
    expectTypeOf<AgentPipelineError['code']>().toEqualTypeOf<AgentPipelineErrorCode>();
    expectTypeOf<'RUN_CLOSED'>().toExtend<AgentPipelineErrorCode>();
    expectTypeOf<'RUN_CLOSD'>().not.toExtend<AgentPipelineErrorCode>();
    expectTypeOf<FollowOptions>().toBeObject();
  });
});

describe('what the compiler refuses', () => {
  // Each `@ts-expect-error` in the fixture must meet an error: a type that loosens leaves one unused (TS2578).
  it('compiles test/fixtures/library-types/literal-types.ts with every expected error found', () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
    const config = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined });
    const fixture = path.join(root, 'test/fixtures/library-types/literal-types.ts');
    const program = ts.createProgram([fixture], { ...config!.options, noEmit: true });
    // The fixture's own diagnostics: the checker then checks what it uses of the library, not every file of src/ (tsc in `npm run lint` does).
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(fixture)).map((d) => `${d.file ? path.relative(root, d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
    expect(diagnostics).toEqual([]);
    // The fixture does test something: it holds the expected errors the types must produce.
    expect(ts.sys.readFile(fixture)!.match(/@ts-expect-error/g)!.length).toBeGreaterThanOrEqual(15);
  }, 120_000);
});
