import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, test } from 'vitest';
import { PROJECT_ROOT } from '../helpers/project-paths.js';

/*
 * What an editor shows a package user who writes a pipeline in code: the TypeScript language service's hover text
 * (quick info) on the fields of `definePipeline`'s argument, and the doc comment of every field of the definition types.
 */
const FIXTURE = path.join(PROJECT_ROOT, 'test', 'fixtures', 'library-types', 'hover-docs.ts');

function createService(): ts.LanguageService {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(PROJECT_ROOT, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  const options = config?.options ?? {};
  const host: ts.LanguageServiceHost = {
    getScriptFileNames: () => [FIXTURE],
    getScriptVersion: () => '1',
    getScriptSnapshot: (file) => (ts.sys.fileExists(file) ? ts.ScriptSnapshot.fromString(ts.sys.readFile(file) ?? '') : undefined),
    getCurrentDirectory: () => PROJECT_ROOT,
    getCompilationSettings: () => options,
    getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
    fileExists: ts.sys.fileExists,
    readFile: ts.sys.readFile,
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  };
  return ts.createLanguageService(host, ts.createDocumentRegistry());
}

describe('hover docs of the pipeline definition types', () => {
  let service: ts.LanguageService;
  const text = readFileSync(FIXTURE, 'utf8');
  beforeAll(() => {
    service = createService();
  });

  /** The hover text (signature and doc) on the `nth` occurrence of `field:` in the fixture. */
  function hover(field: string, nth = 0): string {
    let at = -1;
    for (let i = 0; i <= nth; i++) at = text.indexOf(`${field}:`, at + 1);
    const info = service.getQuickInfoAtPosition(FIXTURE, at + 1);
    return [ts.displayPartsToString(info?.displayParts), ts.displayPartsToString(info?.documentation), ...(info?.tags ?? []).map((t) => `@${t.name} ${ts.displayPartsToString(t.text)}`)].join('\n');
  }

  test('a stage timeout, retries, maxBudgetUsd, permissionMode and run say their unit, default and values', () => {
    expect(hover('timeout', 1)).toMatch(/duration/i);
    expect(hover('timeout', 1)).toMatch(/@default 30m/);
    expect(hover('retries')).toMatch(/maximumAttempts|maximum attempts/i);
    expect(hover('retries')).toMatch(/retries \+ 1/);
    expect(hover('maxBudgetUsd')).toMatch(/US dollars/);
    expect(hover('permissionMode')).toMatch(/acceptEdits/);
    expect(hover('permissionMode')).toMatch(/bypassPermissions|plan/);
    expect(hover('run')).toMatch(/sh -c/);
    expect(hover('passEnv')).toMatch(/AGENT_PIPELINE_COMMAND_ENV/);
    expect(hover('budgetUsd')).toMatch(/US dollars/);
  }, 180_000);

  test('every field of the pipeline, stage and defaults types has a doc comment', () => {
    const program = service.getProgram()!;
    const checker = program.getTypeChecker();
    const source = program.getSourceFile(FIXTURE)!;
    const call = source.statements.flatMap((s) => (ts.isVariableStatement(s) ? [...s.declarationList.declarations] : []))[0]!.initializer as ts.CallExpression;
    const signature = checker.getResolvedSignature(call)!;
    const pipelineType = checker.getTypeAtLocation(call);
    const undocumented: string[] = [];
    const walk = (type: ts.Type, where: string, seen: Set<ts.Type>): void => {
      const target = type.getNonNullableType();
      if (seen.has(target)) return;
      seen.add(target);
      for (const prop of checker.getPropertiesOfType(target)) {
        const docs = ts.displayPartsToString(prop.getDocumentationComment(checker)).trim();
        if (!docs) undocumented.push(`${where}.${prop.name}`);
        // Nested option objects (`workspace.push`, `approval`, `retry`…) are walked too, inside the definition types only.
        for (const part of unionParts(checker.getTypeOfSymbol(prop))) if (isOptionObject(part)) walk(part, `${where}.${prop.name}`, seen);
      }
    };
    const unionParts = (type: ts.Type): ts.Type[] => {
      const parts = type.isUnion() ? type.types : [type];
      return parts.flatMap((t) => (checker.isArrayType(t) ? [checker.getTypeArguments(t as ts.TypeReference)[0]!] : [t]));
    };
    const isOptionObject = (type: ts.Type): boolean =>
      (type.flags & ts.TypeFlags.Object) !== 0 && !checker.isArrayType(type) && type.getCallSignatures().length === 0 &&
      checker.getIndexInfosOfType(type).length === 0 && checker.getPropertiesOfType(type).every((p) => p.declarations?.every((d) => d.getSourceFile().fileName.includes('/src/')) ?? false);
    const property = (type: ts.Type, name: string): ts.Type => checker.getTypeOfSymbol(checker.getPropertyOfType(type.getNonNullableType(), name)!);
    walk(pipelineType, 'pipeline', new Set());
    const stage = checker.getIndexTypeOfType(property(pipelineType, 'stages'), ts.IndexKind.Number) ?? checker.getTypeArguments(property(pipelineType, 'stages') as ts.TypeReference)[0]!;
    walk(stage, 'stage', new Set());
    walk(property(pipelineType, 'defaults'), 'defaults', new Set());
    for (const nested of ['workspace', 'limits', 'continueAsNew']) walk(property(pipelineType, nested), nested, new Set());
    for (const nested of ['retry', 'sandbox', 'review', 'permissionRequest']) walk(property(stage, nested), `stage.${nested}`, new Set());
    expect(signature).toBeDefined();
    expect(undocumented).toEqual([]);
  }, 180_000);
});
