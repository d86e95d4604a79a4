#!/usr/bin/env node
// @ts-check
/**
 * Checks the whole import graph of src/ as TypeScript sees it, type imports included (eslint's import-x/no-cycle skips
 * them): no file may take part in an import loop, and no import may point up the layers of scripts/layers.js.
 * Usage: node scripts/check-imports.js [ROOT]   (exit 1 listing every loop and upward import, 0 when there is none)
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { LAYERS } from './layers.js';

/** Every `.ts` file under `dir`, as paths relative to `root` with forward slashes. */
function sourceFiles(root, dir) {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => `${dir}/${file.split(path.sep).join('/')}`);
}

/** The files of src/ that `file` imports, exports from or `import()`s, type-only imports included. */
function importsOf(root, file) {
  const { importedFiles } = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true);
  return importedFiles
    .map(({ fileName }) => fileName)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)).replace(/\.js$/, '.ts'))
    .filter((target) => existsSync(path.join(root, target)));
}

/** The import graph of `root`/src: file → the files it imports. */
export function importGraph(root) {
  return new Map(sourceFiles(root, 'src').map((file) => [file, importsOf(root, file)]));
}

/** Tarjan's strongly connected components with more than one file (or a file importing itself): the loops. */
export function importLoops(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const loops = [];
  let next = 0;
  const visit = (file) => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file), low.get(target)));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file), index.get(target)));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)?.includes(file)) loops.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return loops;
}

/** The position of `file` in LAYERS, or -1 when no layer holds it. */
function layerOf(file) {
  return LAYERS.findIndex((layer) => layer.paths.some((place) => file === place || file.startsWith(`${place}/`)));
}

/** Imports that point from a lower layer up to a higher one, as `from → to (layer names)`. */
export function upwardImports(graph) {
  const problems = [];
  for (const [file, targets] of graph) {
    for (const target of targets) {
      if (layerOf(target) > layerOf(file)) problems.push(`${file} → ${target} (${LAYERS[layerOf(file)]?.name ?? 'no layer'} may not import ${LAYERS[layerOf(target)].name})`);
    }
  }
  return problems;
}

/** Every problem of the import graph under `root`, one line each. */
export function importGraphProblems(root) {
  const graph = importGraph(root);
  return [
    ...importLoops(graph).map((loop) => `import loop (type imports included) through ${loop.length} files: ${loop.join(', ')}`),
    ...upwardImports(graph).map((line) => `upward import: ${line}`),
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = path.resolve(process.argv[2] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
  const problems = importGraphProblems(root);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} import problem(s): break each loop by moving what both sides share down a layer (docs/architecture.md)`);
    process.exit(1);
  }
  console.log('imports: no loop, no upward import');
}
