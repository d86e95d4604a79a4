import { z } from 'zod';
import { findFencedBlocks, type FencedBlock } from './fenced-blocks.js';

/**
 * The agent output contract: an agent ends its answer with a fenced JSON block
 * `{"success", "summary", "outputs", "error"?}`; reviewers add `verdict` and `feedback`.
 */
export const agentReportSchema = z.object({
  success: z.boolean(),
  summary: z.string(),
  outputs: z.record(z.string(), z.unknown()).default({}),
  error: z.string().optional(),
  verdict: z.enum(['approve', 'rework']).optional(),
  feedback: z.array(z.unknown()).optional(),
});

export type AgentReport = z.infer<typeof agentReportSchema>;

export type ContractReading =
  /** `extra`: the report's top-level fields besides the contract's (`issues`, `pr_ready` …), when it has any. */
  | { kind: 'report'; report: AgentReport; extra?: Record<string, unknown> }
  /** `blocked`: the agent wrote `BLOCKED: reason` (rather than ending with a question). */
  | { kind: 'needs_input'; question: string; blocked: boolean }
  | { kind: 'violation'; reason: string };

const BLOCKED = /^\s*BLOCKED:\s*(.+)$/m;
/** The report fields the contract defines; any other top-level field is kept as the stage's `report`. */
const CONTRACT_FIELDS = new Set(Object.keys(agentReportSchema.shape));

/**
 * The block that is the agent's report: the last fenced block tagged `json` (or `JSON`), or untagged with a body
 * that starts like a JSON object. Blocks in other languages (```bash, ```ts) are the agent showing its work.
 */
export function findReportBlock(text: string): FencedBlock | undefined {
  return findFencedBlocks(text).filter(isJsonBlock).at(-1);
}

function isJsonBlock(block: FencedBlock): boolean {
  if (block.language === '') return block.body.trimStart().startsWith('{');
  return block.language === 'json' || block.language === 'JSON';
}

/**
 * The answer as a person wants to read it: `text` without its report block (the report stays in the transcript
 * and the stage result), trailing blank lines trimmed. The whole text when there is no report block.
 */
export function withoutReportBlock(text: string): string {
  const block = findReportBlock(text);
  if (!block) return text;
  const parts = [text.slice(0, block.start).trimEnd(), text.slice(block.end).replace(/^\s*\n/, '').trimEnd()].filter((part) => part.trim() !== '');
  return parts.length === 0 ? '' : `${parts.join('\n')}\n`;
}

/**
 * Reads an agent's final answer. The report is the last JSON block (agents often quote an example earlier, and
 * show commands in other blocks); when that block is malformed or breaks the schema the answer violates the
 * contract, without falling back to an earlier block. Without a report, `BLOCKED: reason` or a closing question
 * means the agent needs a person; anything else violates the contract.
 */
export function readAgentOutput(text: string): ContractReading {
  const block = findReportBlock(text);
  let problem: string | undefined;
  if (block) {
    const reading = readReport(block);
    if (reading.kind === 'report') return reading;
    problem = reading.reason;
  }
  const blocked = BLOCKED.exec(text);
  if (blocked) return { kind: 'needs_input', question: blocked[1].trim(), blocked: true };
  const question = findClosingQuestion(text);
  if (question && !block) return { kind: 'needs_input', question, blocked: false };
  if (text.trim() === '') return { kind: 'violation', reason: 'the agent gave no answer' };
  return {
    kind: 'violation',
    reason: problem ?? 'the answer has no fenced JSON block with "success" and "summary"',
  };
}

function readReport(block: FencedBlock): Exclude<ContractReading, { kind: 'needs_input' }> {
  let json: unknown;
  try {
    json = JSON.parse(block.body);
  } catch (err) {
    const cut = block.closed ? '' : ' (the block is never closed: the answer was cut off)';
    return { kind: 'violation', reason: `the last fenced JSON block is not valid JSON${cut}: ${(err as Error).message}` };
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    return { kind: 'violation', reason: 'the last fenced JSON block is not a JSON object with "success" and "summary"' };
  }
  const parsed = agentReportSchema.safeParse(json);
  if (parsed.success) {
    const extra = Object.fromEntries(Object.entries(json).filter(([key]) => !CONTRACT_FIELDS.has(key)));
    return { kind: 'report', report: parsed.data, ...(Object.keys(extra).length > 0 ? { extra } : {}) };
  }
  return {
    kind: 'violation',
    reason: `the last fenced JSON block does not match the contract: ${parsed.error.issues
      .map((i) => `${i.path.join('.') || '(root)'} ${i.message}`)
      .join('; ')}`,
  };
}

/** The last paragraph when it ends with a question mark: an agent asking instead of reporting. */
function findClosingQuestion(text: string): string | undefined {
  const paragraphs = text.trim().split(/\n\s*\n/);
  const last = paragraphs[paragraphs.length - 1]?.trim();
  return last && last.endsWith('?') ? last : undefined;
}

/** Longest summary a `contract: none` stage reports; the whole answer stays in the deliverable. @unit characters */
export const FREE_SUMMARY_MAX_CHARS = 2_000;

/**
 * Reads an answer under `contract: none`: no report block is asked, so the answer's last paragraph (trimmed)
 * is the summary and there are no outputs. Only a last paragraph `BLOCKED: <question>` asks a person; a
 * deliverable that merely ends with a question is still a deliverable.
 */
export function readFreeAnswer(text: string): ContractReading {
  const paragraphs = text.trim().split(/\n\s*\n/);
  const last = paragraphs[paragraphs.length - 1]?.trim() ?? '';
  if (last === '') return { kind: 'violation', reason: 'the agent gave no answer' };
  const blocked = /^BLOCKED:\s*([\s\S]+)$/.exec(last);
  if (blocked) return { kind: 'needs_input', question: blocked[1].trim(), blocked: true };
  const summary = last.length > FREE_SUMMARY_MAX_CHARS ? `${last.slice(0, FREE_SUMMARY_MAX_CHARS - 1)}…` : last;
  return { kind: 'report', report: { success: true, summary, outputs: {} } };
}
