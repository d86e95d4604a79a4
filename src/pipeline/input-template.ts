import { z } from 'zod';

/*
 * A stage option given as one run input, `{{inputs.NAME}}`, filled per run (stage-option-inputs.ts). Its own module,
 * below the schema, so the schema and the filling both use it. Pure.
 */

/** A whole field that is one run input: `{{inputs.NAME}}`. */
export const INPUT_TEMPLATE = /^\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}$/;

/** The type of such a field. */
export type InputTemplate = `{{inputs.${string}}}`;

/** A whole `{{inputs.NAME}}`; the one instance, so that error messages know a union of an option and it. */
export const inputTemplateSchema = z.custom<InputTemplate>((v) => typeof v === 'string' && INPUT_TEMPLATE.test(v));

/**
 * `schema`, or a whole `{{inputs.NAME}}` filled per run. The option's own schema comes first: a bad value is
 * described as that schema describes it (issue-messages.ts).
 */
export function orInputTemplate<T extends z.ZodType>(schema: T) {
  return z.union([schema, inputTemplateSchema]);
}
