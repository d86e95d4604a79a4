#!/usr/bin/env node
// @ts-check
/**
 * Build step (`npm run build`, after tsc): writes the pipeline file's JSON Schema, with each field's doc comment as
 * its hover text, to dist/pipeline.schema.json, which the package exports as `agent-pipeline/pipeline.schema.json`
 * (docs/pipeline.md, "Editor support").
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPipelineJsonSchema, PIPELINE_JSON_SCHEMA_FILE } from '../dist/pipeline/json-schema.js';
import { addFieldDocs } from './pipeline-schema-docs.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const target = path.join(root, 'dist', PIPELINE_JSON_SCHEMA_FILE);
writeFileSync(target, `${JSON.stringify(addFieldDocs(buildPipelineJsonSchema(), root), null, 2)}\n`);
process.stderr.write(`pipeline JSON schema written to ${target}\n`);
