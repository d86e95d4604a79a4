import path from 'node:path';

/*
 * The one test of "this path is inside that folder", by text. Callers decide which paths they compare (as written, or
 * real paths once every symlink is followed): comparing a real path with a path as written tells nothing.
 */

/**
 * Whether `candidate` is `root` or lies below it, by their text (both resolved against the current folder first).
 * A name that merely starts with two dots (`..cache`) is inside; `..`, `../x` and another drive are not.
 */
export function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(path.resolve(root), path.resolve(candidate));
  return rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}

/** {@link isInside}, but never `root` itself: what may be a file in it, or a folder of it to delete. */
export function isStrictlyInside(root: string, candidate: string): boolean {
  return path.resolve(root) !== path.resolve(candidate) && isInside(root, candidate);
}

/** Resolves `relative` inside `dir` by its text, refusing paths that escape it (`../`, absolute elsewhere). */
export function resolveInside(dir: string, relative: string): string | undefined {
  const full = path.resolve(dir, relative);
  return isInside(dir, full) ? full : undefined;
}
