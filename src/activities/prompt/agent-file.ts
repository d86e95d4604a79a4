import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { formatPath } from '../../pipeline/errors.js';
import { describeIssues } from '../../pipeline/issue-messages.js';
import { BACKENDS } from '../../pipeline/schema.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { stageFailure } from '../failures.js';
import { readPipelineFile } from './pipeline-file.js';

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

/** An agent definition as a stage uses it. */
export interface AgentDefinition {
  /** Absolute path of the agent file. */
  file: string;
  frontmatter: AgentFrontmatter;
  /** The body, then each reference under a `## Reference: <path>` heading. */
  persona: string;
  /** Missing or unreadable references. */
  warnings: string[];
}

/** Splits an agent file into raw frontmatter and body; a file without `---` lines is all body. */
export function splitFrontmatter(text: string): { frontmatter: unknown; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match) return { frontmatter: {}, body: text.trim() };
  const doc = parseDocument(match[1]);
  if (doc.errors.length > 0) throw new Error(`its frontmatter is not valid YAML: ${doc.errors[0].message}`);
  return { frontmatter: doc.toJS() ?? {}, body: match[2].trim() };
}

/**
 * Reads an agent definition: frontmatter, persona body and references.
 * @throws FILE_NOT_FOUND naming the path when the file is missing; CONFIG_INVALID for bad frontmatter
 */
export async function loadAgentFile(baseDir: string, relative: string, stageId: string): Promise<AgentDefinition> {
  const { file, text } = await readPipelineFile(baseDir, relative, stageId, 'agent');
  let raw: { frontmatter: unknown; body: string };
  try {
    raw = splitFrontmatter(text);
  } catch (err) {
    throw stageFailure({ type: 'CONFIG_INVALID', stageId, message: `agent file ${file}: ${(err as Error).message}`, details: { path: file } });
  }
  const parsed = agentFrontmatterSchema.safeParse(raw.frontmatter, { reportInput: true });
  if (!parsed.success) {
    const problems = describeIssues(agentFrontmatterSchema, parsed.error.issues).map((i) => `${formatPath(i.path) || '(frontmatter)'}: ${i.message}`).join('; ');
    throw stageFailure({
      type: 'CONFIG_INVALID',
      stageId,
      message: `agent file ${file} has invalid frontmatter: ${problems}`,
      hint: 'expected name, description, model, tools, backend (claude-cli or anthropic-api) and references',
      details: { path: file },
    });
  }
  const frontmatter = parsed.data;
  const warnings: string[] = [];
  const sections = [raw.body];
  for (const reference of frontmatter.references ?? []) {
    const referenceFile = path.resolve(path.dirname(file), reference);
    try {
      sections.push(`## Reference: ${reference}\n\n${(await readFile(referenceFile, 'utf8')).trim()}`);
    } catch (err) {
      warnings.push(
        `agent file ${file} lists reference ${reference}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'} at ${referenceFile}); the stage ran without it`,
      );
    }
  }
  return { file, frontmatter, persona: sections.filter(Boolean).join('\n\n'), warnings };
}

/**
 * The stage with the agent's `model`, `tools` and `backend` filled in where the stage did not set
 * its own: stage > agent > pipeline defaults > built-ins.
 */
export function applyAgentDefaults(stage: ResolvedStage, agent: AgentFrontmatter): ResolvedStage {
  const setByStage = (field: string): boolean =>
    stage.setByStage ? stage.setByStage.includes(field) : (stage as unknown as Record<string, unknown>)[field] !== undefined;
  const next = { ...stage };
  if (agent.model && agent.model !== 'inherit' && !setByStage('model')) next.model = agent.model;
  if (agent.backend && !setByStage('backend')) next.backend = agent.backend;
  if (agent.tools && !setByStage('allowedTools')) next.allowedTools = agent.tools;
  return next;
}
