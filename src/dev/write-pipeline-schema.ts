// Build step: writes the pipeline file's JSON Schema next to the compiled code, for editors (docs/pipeline.md).
import { fileURLToPath } from 'node:url';
import { writeFileAtomic } from '../activities/workspace/run-workspace.js';
import { buildPipelineJsonSchema, PIPELINE_JSON_SCHEMA_FILE } from '../pipeline/json-schema.js';

const target = fileURLToPath(new URL(`../${PIPELINE_JSON_SCHEMA_FILE}`, import.meta.url));
await writeFileAtomic(target, `${JSON.stringify(buildPipelineJsonSchema(), null, 2)}\n`);
process.stderr.write(`pipeline JSON schema written to ${target}\n`);
