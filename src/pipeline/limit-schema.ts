import { z } from 'zod';
import { MAX_LIMIT_KEY_LENGTH, MAX_LIMITS } from './limits.js';

/** `limits:` on a pipeline or a stage (docs/limits.md); kept apart from limits.ts so workflow code loads no zod. */
export const limitSchema = z.strictObject({
  /** The key, a template over `{{inputs.…}}`, `{{run.id}}` and `{{run.pipeline}}`, e.g. `repo:{{inputs.repo}}`. */
  key: z.string().min(1).max(MAX_LIMIT_KEY_LENGTH),
  /** How many holders the key may have at once, across every run. */
  concurrency: z.number().int().min(1).max(1000),
});

export const limitsSchema = z.array(limitSchema).min(1).max(MAX_LIMITS, `at most ${MAX_LIMITS} keys; one key per shared resource is enough`);
