import { createHash } from 'node:crypto';

/**
 * How an API key is named wherever it must be told apart (the limiter workflow's id, `status`, logs): the first 12 hex
 * digits of its SHA-256, never the key or a part of it. Find yours with `printf %s "$ANTHROPIC_API_KEY" | sha256sum | cut -c1-12`.
 */
export function apiKeyId(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}
