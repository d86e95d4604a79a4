import { z } from 'zod';
import { durationSchema } from './duration-schema.js';
import { INPUT_TEMPLATE, inputTemplateSchema } from './input-template.js';
import { pipelineSchema } from './schema.js';

/** Where the package ships the schema: `dist/pipeline.schema.json`, exported as `agent-pipeline/pipeline.schema.json`. */
export const PIPELINE_JSON_SCHEMA_FILE = 'pipeline.schema.json';

/**
 * A duration as JSON Schema, with the words an editor shows for a wrong one (`patternErrorMessage`, VS Code's). No
 * `description`: an editor's hover would show it instead of the field's own (`timeout`: of what, and its default).
 */
const DURATION_JSON_SCHEMA = {
  type: ['integer', 'string'],
  exclusiveMinimum: 0,
  patternErrorMessage: 'not a duration; use a string such as "90s", "30m", "2h" or "1d", or a whole number of milliseconds above 0',
};

/**
 * The pipeline file schema as JSON Schema, for editors: `# yaml-language-server: $schema=…` in a pipeline file gives
 * completion, hover and typo warnings (docs/pipeline.md, "Editor support").
 *
 * Made from the same zod schema `validate` parses with, so the two cannot drift. It is draft-07 because the YAML
 * language server (VS Code's YAML extension, and the editors built on it) supports JSON Schema 7 and below. What JSON
 * Schema cannot say (a stage needs a `prompt`, an `agent` or a `run`; `needs` naming known stages; template variables;
 * files that exist) only `agent-pipeline validate` checks: the schema accepts a little more than validate, never less.
 * Each field's hover text, its doc comment, is added at build time by scripts/write-pipeline-schema.js.
 */
export function buildPipelineJsonSchema(): Record<string, unknown> {
  // `input`: what a person writes (before defaults). A whole `{{inputs.NAME}}` (a stage option filled per run) is a
  // custom check zod cannot describe: say it as the pattern it tests, else the option's union would accept anything.
  // Any other refinement becomes `{}` (`unrepresentable: 'any'`), so that the schema never refuses what validate accepts.
  const schema = z.toJSONSchema(pipelineSchema, {
    target: 'draft-7',
    io: 'input',
    unrepresentable: 'any',
    override: ({ zodSchema, jsonSchema }) => {
      if (zodSchema === inputTemplateSchema) Object.assign(jsonSchema, { type: 'string', pattern: INPUT_TEMPLATE.source });
      // One node, not zod's `anyOf` of a number and a string: an editor then says what a duration is (`1 minute` was
      // "Expected integer"). `pattern` applies to strings only and `exclusiveMinimum` to numbers only.
      if ((zodSchema as unknown) === durationSchema) {
        const pattern = jsonSchema.anyOf?.find((option) => typeof option === 'object' && option.type === 'string')?.pattern;
        delete jsonSchema.anyOf;
        Object.assign(jsonSchema, { ...DURATION_JSON_SCHEMA, pattern });
      }
    },
  });
  return {
    ...schema,
    title: 'agent-pipeline pipeline file',
    description: 'A pipeline of agent-pipeline: its name, inputs, stage defaults and stages. `agent-pipeline validate FILE` checks what a schema cannot (the stage graph, template variables, the files it names).',
  };
}
