/**
 * Which file a one-line `prompt:` names, without touching the disk, so that the worker's lookup and anything that
 * carries a run's files (a bundle made at `start`) agree: `promptCandidates` lists, in lookup order, every path the
 * prompt may stand for; the first that exists wins. Pure.
 */

/** Extensions tried after a bare name, in order. */
export const PROMPT_EXTENSIONS = ['.md', '.txt', '.prompt'] as const;
const FILE_LIKE = /^[A-Za-z0-9_][A-Za-z0-9_./-]*$/;

/** One line, no spaces, only file-name characters, not ending in a full stop (`Summarize.` is a sentence). */
export function looksLikePromptFile(prompt: string): boolean {
  const trimmed = prompt.trim();
  return !trimmed.includes('\n') && FILE_LIKE.test(trimmed) && !trimmed.endsWith('.');
}

/** True for a name that carries its own extension (`steps/spec.md`), which is read as written. */
export function hasPromptExtension(name: string): boolean {
  return /\.[A-Za-z0-9]+$/.test(name.split('/').pop() ?? '');
}

/**
 * The files a prompt may name, relative to the pipeline file's folder, in lookup order: in `promptsDir` first,
 * then beside the pipeline file; a bare name also with each of `PROMPT_EXTENSIONS`. Empty for inline text.
 */
export function promptCandidates(prompt: string, promptsDir?: string): string[] {
  if (!looksLikePromptFile(prompt)) return [];
  const name = prompt.trim();
  const names = hasPromptExtension(name) ? [name] : [name, ...PROMPT_EXTENSIONS.map((ext) => name + ext)];
  const folders = promptsDir ? [promptsDir.replace(/\/+$/, ''), ''] : [''];
  return folders.flatMap((folder) => names.map((n) => (folder ? `${folder}/${n}` : n)));
}
