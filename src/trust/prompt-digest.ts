import { createHash } from 'node:crypto';
import type { AgentPromptRequest } from '../pipeline/agent-prompt.js';
import { canonicalJson } from './canonical-json.js';

/**
 * The digest of what an agent asks mid-turn, over what a person is shown of it: the kind, the tool, its input as
 * summarised, the questions. The attempt computes it (after redaction, on exactly what the wait shows) and the wait
 * shows it; a decision naming it (`request`, covered by its signature) decides this request and no other.
 */
export function promptDigest(request: Pick<AgentPromptRequest, 'kind' | 'tool' | 'input' | 'questions'>): string {
  const { kind, tool, input, questions } = request;
  return createHash('sha256').update(canonicalJson({ kind, tool, input, questions: questions ?? [] })).digest('hex');
}
