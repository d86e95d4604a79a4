// @ts-check
/**
 * Hover text for the pipeline JSON Schema: the doc comment (TSDoc, with its `@default` and `@unit`) of each field of
 * `PipelineDefinition`, put in the schema's `description` of the same field. zod's JSON Schema knows only the shapes;
 * the words a TypeScript user sees on hover live in the type, so an editor on a YAML file shows the same ones.
 * Build time only (it needs the TypeScript compiler and the sources): `scripts/write-pipeline-schema.js` runs it.
 */
import path from 'node:path';
import ts from 'typescript';

/**
 * Adds a `description` to every field of `schema` (a JSON Schema of the pipeline file) that has a doc comment in
 * `PipelineDefinition` of `root`/src/pipeline/schema.ts and no description yet. Mutates and returns `schema`.
 * @param {Record<string, unknown>} schema
 * @param {string} root the repository's folder
 */
export function addFieldDocs(schema, root) {
  const file = path.join(root, 'src', 'pipeline', 'schema.ts');
  // No @types packages and no check of declaration files: only the types schema.ts imports are read (half the time,
  // the same docs), which the unit test that builds the schema from the sources also pays.
  const program = ts.createProgram([file], { strict: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, types: [], skipLibCheck: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const symbol = source && checker.getSymbolAtLocation(source)?.exports?.get(ts.escapeLeadingUnderscores('PipelineDefinition'));
  if (!symbol) throw new Error(`${file} exports no PipelineDefinition: the schema's field docs cannot be read`);
  annotate(schema, checker.getDeclaredTypeOfSymbol(symbol), checker);
  return schema;
}

/**
 * Walks a JSON Schema node and the TypeScript type it describes side by side.
 * @param {unknown} node
 * @param {ts.Type | undefined} type
 * @param {ts.TypeChecker} checker
 */
function annotate(node, type, checker) {
  if (!node || typeof node !== 'object' || !type) return;
  const json = /** @type {Record<string, any>} */ (node);
  for (const option of json.anyOf ?? []) annotate(option, type, checker);
  for (const [name, field] of Object.entries(json.properties ?? {})) {
    const property = propertyOf(type, name, checker);
    if (!property) continue;
    const text = describe(property, checker);
    if (text && !field.description) field.description = text;
    annotate(field, checker.getTypeOfSymbol(property), checker);
  }
  if (json.items) annotate(json.items, elementOf(type, checker), checker);
  if (typeof json.additionalProperties === 'object') annotate(json.additionalProperties, valueOf(type, checker), checker);
}

/**
 * The property `name` of `type`, or of the first member of a union that has it (a field may be a string or an object).
 * @param {ts.Type} type @param {string} name @param {ts.TypeChecker} checker
 * @returns {ts.Symbol | undefined}
 */
function propertyOf(type, name, checker) {
  const members = type.isUnion() ? type.types : [type];
  for (const member of members) {
    const found = checker.getPropertyOfType(member, name);
    if (found) return found;
  }
  return undefined;
}

/** @param {ts.Type} type @param {ts.TypeChecker} checker */
function elementOf(type, checker) {
  const members = type.isUnion() ? type.types : [type];
  const array = members.find((member) => checker.isArrayType(member));
  return array ? checker.getTypeArguments(/** @type {ts.TypeReference} */ (array))[0] : undefined;
}

/** @param {ts.Type} type @param {ts.TypeChecker} checker */
function valueOf(type, checker) {
  const members = type.isUnion() ? type.types : [type];
  for (const member of members) {
    const value = checker.getIndexTypeOfType(member, ts.IndexKind.String);
    if (value) return value;
  }
  return undefined;
}

/**
 * A field's doc comment with its `@default` and `@unit`, as one line of text.
 * @param {ts.Symbol} property @param {ts.TypeChecker} checker
 */
function describe(property, checker) {
  const doc = ts.displayPartsToString(property.getDocumentationComment(checker)).replace(/\s+/g, ' ').trim();
  const tags = property
    .getJsDocTags(checker)
    .filter((tag) => tag.name === 'default' || tag.name === 'unit')
    .map((tag) => `${tag.name === 'default' ? 'Default' : 'Unit'}: ${ts.displayPartsToString(tag.text).trim()}.`);
  return [doc, ...tags].filter(Boolean).join(' ');
}
