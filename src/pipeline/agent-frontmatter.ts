import { parseDocument } from 'yaml';
import { z } from 'zod';
import { BACKENDS } from './stage-options-schema.js';

/*
 * The frontmatter of an agent definition file, read by the worker that runs the agent and by the client that bundles
 * the files it references.
 */

/** A list written as YAML sequence or as `Read, Edit, Bash` (Claude Code's own agent files use the latter). */
const nameList = z.union([
  z.array(z.string().min(1)),
  z.string().transform((s) => s.split(',').map((t) => t.trim()).filter(Boolean)),
]);

/** The frontmatter of an agent definition file. Unknown fields (`color`, …) are allowed and ignored. */
export const agentFrontmatterSchema = z.looseObject({
  name: z.string().optional(),
  description: z.string().optional(),
  /** A tier (`opus`, `sonnet`, `haiku`) or model id; `inherit` means "whatever the stage says". */
  model: z.string().min(1).optional(),
  /** Becomes the stage's `allowedTools` when the stage does not set them. */
  tools: nameList.optional(),
  backend: z.enum(BACKENDS).optional(),
  /** Files appended to the persona under headings, relative to the agent file. */
  references: nameList.optional(),
});

export type AgentFrontmatter = z.infer<typeof agentFrontmatterSchema>;

/** Splits an agent file into raw frontmatter and body; a file without `---` lines is all body. */
export function splitFrontmatter(text: string): { frontmatter: unknown; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match) return { frontmatter: {}, body: text.trim() };
  const doc = parseDocument(match[1]);
  if (doc.errors.length > 0) throw new Error(`its frontmatter is not valid YAML: ${doc.errors[0].message}`);
  return { frontmatter: doc.toJS() ?? {}, body: match[2].trim() };
}
