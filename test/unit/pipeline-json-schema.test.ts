import { Ajv } from 'ajv';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { buildPipelineJsonSchema } from '../../src/pipeline/json-schema.js';
import { pipelineSchema } from '../../src/pipeline/schema.js';

const root = path.resolve(import.meta.dirname, '../..');
// Ajv's default is draft-07, the draft the YAML language server reads; `strict: false` for zod's `format: uri` & co.
const validateFile = new Ajv({ allErrors: true, strict: false, logger: false }).compile(buildPipelineJsonSchema());

/** Every pipeline the repository shows a person: the examples' files, and the YAML blocks of the README and docs. */
function documentedPipelines(): { where: string; text: string }[] {
  const examples = readdirSync(path.join(root, 'examples'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.yaml') && !file.includes('scenario'))
    .map((file) => ({ where: `examples/${file}`, text: readFileSync(path.join(root, 'examples', file), 'utf8') }));
  const pages = ['README.md', ...readdirSync(path.join(root, 'docs')).map((page) => `docs/${page}`)];
  const blocks = pages.flatMap((page) =>
    [...readFileSync(path.join(root, page), 'utf8').matchAll(/^```ya?ml\n([\s\S]*?)^```$/gm)].map((m, i) => ({ where: `${page} block ${i + 1}`, text: m[1] })),
  );
  return [...examples, ...blocks].flatMap(({ where, text }) => parseAllDocuments(text).flatMap((doc) => {
    const data: unknown = doc.toJS();
    if (!data || typeof data !== 'object' || Array.isArray(data) || 'rules' in data || 'apiVersion' in data) return [];
    // A fragment (a few fields of a pipeline) is checked inside the smallest pipeline around it.
    const whole = { name: 'documented', stages: [{ id: 'only', prompt: 'Say hello to the reader.' }], ...data };
    return [{ where, text: JSON.stringify(whole) }];
  }));
}

describe('the pipeline JSON schema', () => {
  it('accepts every documented pipeline and fragment that validate accepts', () => {
    const found = documentedPipelines();
    expect(found.length).toBeGreaterThan(20);
    const refused = found.flatMap(({ where, text }) => {
      const data: unknown = JSON.parse(text);
      if (!pipelineSchema.safeParse(data).success) return [];
      return validateFile(data) ? [] : [`${where}: ${JSON.stringify(validateFile.errors)}`];
    });
    expect(refused).toEqual([]);
  });

  it('refuses a misspelt field, an unknown choice, a bad duration and a missing stages list, as validate does', () => {
    const wrong: [string, unknown, string][] = [
      ['misspelt field', { name: 'p', stages: [{ id: 'a', promt: 'Say hello.' }] }, 'promt'],
      ['unknown permission mode', { name: 'p', stages: [{ id: 'a', prompt: 'Hi.', permissionMode: 'yolo' }] }, 'permissionMode'],
      ['duration in words', { name: 'p', defaults: { timeout: '1 minute' }, stages: [{ id: 'a', prompt: 'Hi.' }] }, 'timeout'],
      ['no stages', { name: 'p', stage: [{ id: 'a', prompt: 'Hi.' }] }, 'stages'],
    ];
    for (const [what, data, field] of wrong) {
      expect(pipelineSchema.safeParse(data).success, what).toBe(false);
      expect(validateFile(data), what).toBe(false);
      expect(JSON.stringify(validateFile.errors), what).toContain(field);
    }
  });

  it('says what a wrong duration is in the words an editor shows, not "Expected integer"', () => {
    const { timeout } = (buildPipelineJsonSchema().properties as Record<string, Record<string, unknown>>);
    expect(timeout).toMatchObject({ type: ['integer', 'string'], patternErrorMessage: expect.stringContaining('"30m"') });
    expect(validateFile({ name: 'p', timeout: '2 hours', stages: [{ id: 'a', prompt: 'Hi.' }] })).toBe(false);
    expect(validateFile({ name: 'p', timeout: 0, stages: [{ id: 'a', prompt: 'Hi.' }] })).toBe(false);
    expect(validateFile({ name: 'p', timeout: '2 h', stages: [{ id: 'a', prompt: 'Hi.' }] })).toBe(true);
  });

  it('as the build writes it, carries each field\'s doc comment (unit and default included) as its hover text', async () => {
    // Built here from the sources, as `npm run build` builds dist/pipeline.schema.json (scripts/write-pipeline-schema.js):
    // read from dist/, a unit test passed on whatever an earlier build had left there, however the docs changed since.
    const docs = (await import(pathToFileURL(path.join(root, 'scripts', 'pipeline-schema-docs.js')).href)) as { addFieldDocs: (schema: object, root: string) => object };
    const built = docs.addFieldDocs(buildPipelineJsonSchema(), root) as { properties: Record<string, { description?: string; items?: { properties: Record<string, { description?: string }> } }> };
    const stage = built.properties.stages.items?.properties ?? {};
    expect(stage.timeout.description).toMatch(/Default: 30m/);
    expect(stage.retries.description).toMatch(/retries \+ 1/);
    expect(stage.maxBudgetUsd.description).toMatch(/US dollars/);
    expect(built.properties.name.description).toMatch(/letters, digits/);
    // The field's own words, not a description of what any duration is (an editor shows one of them on hover).
    expect(built.properties.timeout.description).toMatch(/whole run/);
  });

  it('is draft-07 (what the YAML language server reads) and is written by the build where the package exports it', () => {
    const schema = buildPipelineJsonSchema();
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown>; scripts: Record<string, string> };
    expect(pkg.exports['./pipeline.schema.json']).toBe('./dist/pipeline.schema.json');
    expect(pkg.scripts.build).toContain('node scripts/write-pipeline-schema.js');
  });
});
