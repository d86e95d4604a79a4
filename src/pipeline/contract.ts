import { z } from 'zod';

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
  | { kind: 'report'; report: AgentReport }
  | { kind: 'needs_input'; question: string }
  | { kind: 'violation'; reason: string };

const FENCED_BLOCK = /```(?:json|JSON)?[ \t]*\r?\n([\s\S]*?)\r?\n?```/g;
const BLOCKED = /^\s*BLOCKED:\s*(.+)$/m;

/**
 * Reads an agent's final answer. The last fenced JSON block wins (agents often quote examples
 * earlier). Without a valid block, `BLOCKED: reason` or a closing question means the agent needs
 * a person; anything else violates the contract.
 */
export function readAgentOutput(text: string): ContractReading {
  const blocks = [...text.matchAll(FENCED_BLOCK)].map((m) => m[1]);
  let lastProblem: string | undefined;
  for (const block of blocks.reverse()) {
    let json: unknown;
    try {
      json = JSON.parse(block);
    } catch {
      lastProblem ??= 'the last fenced block is not valid JSON';
      continue;
    }
    const parsed = agentReportSchema.safeParse(json);
    if (parsed.success) return { kind: 'report', report: parsed.data };
    lastProblem ??= `the JSON block does not match the contract: ${parsed.error.issues
      .map((i) => `${i.path.join('.') || '(root)'} ${i.message}`)
      .join('; ')}`;
  }
  const blocked = BLOCKED.exec(text);
  if (blocked) return { kind: 'needs_input', question: blocked[1].trim() };
  const question = findClosingQuestion(text);
  if (question && blocks.length === 0) return { kind: 'needs_input', question };
  if (text.trim() === '') return { kind: 'violation', reason: 'the agent gave no answer' };
  return {
    kind: 'violation',
    reason: lastProblem ?? 'the answer has no fenced JSON block with "success" and "summary"',
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
  if (blocked) return { kind: 'needs_input', question: blocked[1].trim() };
  const summary = last.length > FREE_SUMMARY_MAX_CHARS ? `${last.slice(0, FREE_SUMMARY_MAX_CHARS - 1)}…` : last;
  return { kind: 'report', report: { success: true, summary, outputs: {} } };
}
