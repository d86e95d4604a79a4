/*
 * Paths in a pipeline file that must stay inside a folder: stage `inputs` inside the run's workspace, `context`
 * files inside the pipeline file's folder. Checked by their text, without the file system, so `validate`, `start`
 * and the workflow agree; the worker checks symlinks again when it reads the files.
 */

/** A path that starts at the root (`/etc/x`, `C:\x`, `\\server\x`) or at a home folder (`~/x`). */
function isAbsolute(relative: string): boolean {
  return /^([/\\~]|[A-Za-z]:)/.test(relative);
}

/** True when `relative`, taken from a folder, names something outside it: absolute, or `..` past its top. */
export function leavesFolder(relative: string): boolean {
  if (isAbsolute(relative)) return true;
  let depth = 0;
  for (const part of relative.split(/[/\\]+/)) {
    if (part === '..') depth--;
    else if (part !== '.' && part !== '') depth++;
    if (depth < 0) return true;
  }
  return false;
}
