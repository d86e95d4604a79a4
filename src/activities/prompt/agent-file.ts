import path from 'node:path';
import { agentFrontmatterSchema, splitFrontmatter, type AgentFrontmatter } from '../../pipeline/agent-frontmatter.js';
import { formatPath } from '../../pipeline/errors.js';
import { describeIssues } from '../../pipeline/issue-messages.js';
import type { ResolvedStage } from '../../pipeline/stage-options.js';
import { stageFailure } from '../failures.js';
import { PipelineFileError, pipelineFileFailure, readPipelineFile, readPipelineText } from './pipeline-file.js';

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
      sections.push(`## Reference: ${reference}\n\n${(await readPipelineText(baseDir, reference, path.dirname(file))).text.trim()}`);
    } catch (err) {
      // A reference outside the pipeline's folder, or too large, fails the stage; a missing one is only a warning.
      if (err instanceof PipelineFileError && err.reason === 'refused') {
        throw pipelineFileFailure(err, { stageId, field: 'references', relative: reference, file: referenceFile, label: `agent file ${file}'s reference` });
      }
      const code = err instanceof PipelineFileError ? err.code : (err as NodeJS.ErrnoException).code;
      warnings.push(`agent file ${file} lists reference ${reference}, which cannot be read (${code ?? 'error'} at ${referenceFile}); the stage ran without it`);
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
