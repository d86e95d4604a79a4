import type Anthropic from '@anthropic-ai/sdk';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from '../../workspace/run-workspace.js';

/**
 * A Messages API conversation kept in the stage's folder, so a later attempt can continue it (a
 * person's answer, reviewer feedback, a request to fix the report block) the way the CLI resumes a
 * session. Its id plays the role of the CLI's session id.
 */
export interface ApiConversation {
  id: string;
  model: string;
  system: string;
  /** The system blocks the first request sent (context files, earlier work, persona); continuations re-send them for the cache. */
  systemBlocks?: string[];
  /** Every message so far, the model's answers included. */
  messages: Anthropic.MessageParam[];
  /** @unit milliseconds since the epoch */
  updatedAt: number;
}

const ID_PATTERN = /^api-[0-9a-f-]{36}$/;

export function newConversationId(): string {
  return `api-${randomUUID()}`;
}

/** True for ids this backend makes; anything else (a CLI session id) is not a conversation of ours. */
function isConversationId(id: string): boolean {
  return ID_PATTERN.test(id);
}

/** The stored conversation, or `undefined` when there is none with that id. */
export async function loadConversation(dir: string, id: string): Promise<ApiConversation | undefined> {
  if (!isConversationId(id)) return undefined;
  try {
    return JSON.parse(await readFile(path.join(dir, `${id}.json`), 'utf8')) as ApiConversation;
  } catch {
    return undefined;
  }
}

export async function saveConversation(dir: string, conversation: ApiConversation): Promise<void> {
  await writeFileAtomic(path.join(dir, `${conversation.id}.json`), JSON.stringify(conversation, null, 2));
}
