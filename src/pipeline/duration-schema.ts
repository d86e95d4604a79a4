import { z } from 'zod';
import type { Duration } from './duration.js';

/** A duration as written in the file: `90s`, `30m`, `2h`, `1d`, or a number of milliseconds. */
// Typed as `Duration`: the regex accepts exactly the texts the template-literal type describes (and runs of spaces).
export const durationSchema = z.union([
  z.number().int().positive(),
  z.string().regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/, 'expected a duration such as "90s", "30m" or "2h"'),
]) as unknown as z.ZodType<Duration>;
