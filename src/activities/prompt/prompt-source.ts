import { statSync } from 'node:fs';
import path from 'node:path';
import { hasPromptExtension, promptCandidates } from '../../pipeline/prompt-names.js';

export { looksLikePromptFile } from '../../pipeline/prompt-names.js';

/**
 * Where a stage's `prompt:` comes from. A multi-line prompt, or one with spaces, is inline text. A one-line
 * prompt that looks like a file name (`steps/spec.md`, `implement`, `spells/fix`) names a file: looked up in
 * the pipeline's `promptsDir` first (`implement` → `<promptsDir>/implement.md`), then beside the pipeline
 * file. A name that matches no file is an error rather than a one-word prompt sent to the agent, the way
 * the agent-execution spec's spells are looked up.
 */
export type PromptSource =
  | { kind: 'inline' }
  /** `relative` is relative to the pipeline file's folder, ready for `readPipelineFile`. */
  | { kind: 'file'; relative: string }
  /** Looks like a file name but no candidate exists; `tried` are the absolute paths looked at. */
  | { kind: 'missing'; tried: string[] };

/** Decides where `prompt` comes from, checking which of its candidate files exist (see prompt-names.ts). */
export function resolvePromptSource(baseDir: string, prompt: string, promptsDir?: string): PromptSource {
  const candidates = promptCandidates(prompt, promptsDir);
  if (candidates.length === 0) return { kind: 'inline' };
  for (const relative of candidates) {
    if (isFile(path.resolve(baseDir, relative))) return { kind: 'file', relative };
  }
  // A name with an extension keeps naming its file, so the read fails with the file's own error.
  if (hasPromptExtension(prompt.trim())) return { kind: 'file', relative: candidates[candidates.length - 1] };
  return { kind: 'missing', tried: candidates.map((relative) => path.resolve(baseDir, relative)) };
}

/** The message for a prompt that names no file, shared by `validate` and the worker. */
export function missingPromptMessage(prompt: string, tried: readonly string[]): string {
  return (
    `prompt "${prompt.trim()}" looks like a file name but matches no file (looked for ${tried.join(', ')}); ` +
    'create the file, set `promptsDir:` to the folder it is in, or write the prompt as text (a sentence, or several lines)'
  );
}

function isFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
