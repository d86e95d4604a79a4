import path from 'node:path';
import ts from 'typescript';

/** What `tsc -p CONFIG` reports: its diagnostics formatted as tsc prints them without a terminal. */
export interface TypeCheckResult {
  /** Diagnostics of category error (tsc exits non-zero when there is one). */
  errors: number;
  /** Every diagnostic, `file(line,col): error TSnnnn: message`, file names relative to the config's folder. */
  output: string;
}

/** What a check reports on. */
export interface TypeCheckOptions {
  /**
   * Checks and reports only the files this accepts (absolute paths), with the config's and the program's global
   * diagnostics, as an editor shows the problems of the files open in it: for a question about some files' errors
   * alone. A file's diagnostics are the same as in a whole check; the files left out are not type-checked at all (each
   * of a library's declaration files costs a check with `skipLibCheck` off). @default every file, as `tsc -p`
   */
  onlyFiles?: (fileName: string) => boolean;
}

/**
 * Checks TypeScript projects as `tsc -p CONFIG` does (the config's options and files, the diagnostics tsc reports
 * before emitting, and an emit unless the config says `noEmit`), in this process. The checks of one checker share
 * their parsed source files through TypeScript's own document registry, which reuses a file only between programs
 * whose options parse it alike (the registry tsserver uses across projects): a library's declarations, parsed once
 * for several configs, made up a third of each `tsc` process's CPU time, and starting TypeScript another tenth.
 */
export function createTypeChecker(): (configFile: string, options?: TypeCheckOptions) => TypeCheckResult {
  const registry = ts.createDocumentRegistry();
  return (configFile, { onlyFiles } = {}) => {
    const parsed = ts.getParsedCommandLineOfConfigFile(configFile, {}, {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(`${configFile}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`);
      },
    });
    if (!parsed) throw new Error(`${configFile}: cannot read the config`);
    const host = ts.createCompilerHost(parsed.options);
    // As `tsc -p` run in the config's folder.
    const folder = path.dirname(path.resolve(configFile));
    host.getCurrentDirectory = () => folder;
    const key = registry.getKeyForCompilationSettings(parsed.options);
    host.getSourceFile = (fileName, languageVersionOrOptions) => {
      const text = host.readFile(fileName);
      if (text === undefined) return undefined;
      // The registry's key for the file, as TypeScript makes it (its own toPath is internal).
      const filePath = host.getCanonicalFileName(path.resolve(folder, fileName)) as ts.Path;
      // One version for every file: nothing changes them while the checker lives.
      return registry.acquireDocumentWithKey(fileName, filePath, parsed.options, key, ts.ScriptSnapshot.fromString(text), '1', undefined, languageVersionOrOptions);
    };
    const program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options, host, configFileParsingDiagnostics: parsed.errors });
    const diagnostics = [...(onlyFiles ? diagnosticsOf(program, onlyFiles) : ts.getPreEmitDiagnostics(program)), ...(parsed.options.noEmit ? [] : program.emit().diagnostics)];
    return {
      errors: diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error).length,
      output: ts.formatDiagnostics(diagnostics, host),
    };
  };
}

/** What `getPreEmitDiagnostics` reports, for the source files `accept` takes alone (see `onlyFiles`). */
function diagnosticsOf(program: ts.Program, accept: (fileName: string) => boolean): readonly ts.Diagnostic[] {
  const files = program.getSourceFiles().filter((file) => accept(path.resolve(file.fileName)));
  const programWide = [...program.getConfigFileParsingDiagnostics(), ...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()];
  // Each file's come with the program-wide ones again: kept once.
  return ts.sortAndDeduplicateDiagnostics([...programWide, ...files.flatMap((file) => ts.getPreEmitDiagnostics(program, file))]);
}
