import { isNode, isScalar, LineCounter, parseDocument, Scalar, type Document } from 'yaml';

/** Finds the line of a field in the pipeline file, or of its nearest parent that exists. */
export class FieldLocator {
  private readonly lineCounter = new LineCounter();
  private readonly doc: Document;

  constructor(text: string) {
    this.doc = parseDocument(text, { lineCounter: this.lineCounter });
  }

  /** The line of the field at `fieldPath` (keys and indexes), or of its nearest parent in the file. */
  line(fieldPath: readonly PropertyKey[]): number | undefined {
    for (let depth = fieldPath.length; depth >= 0; depth--) {
      const node = depth === 0 ? this.doc.contents : this.doc.getIn(fieldPath.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) return this.lineCounter.linePos(node.range[0]).line;
    }
    return undefined;
  }

  /** The line where a text field's value starts: the line after `|` or `>` for block scalars. */
  textLine(fieldPath: readonly PropertyKey[]): number | undefined {
    const node = this.doc.getIn(fieldPath as unknown[], true);
    const line = this.line(fieldPath);
    if (!isScalar(node) || line === undefined) return line;
    return node.type === Scalar.BLOCK_LITERAL || node.type === Scalar.BLOCK_FOLDED ? line + 1 : line;
  }
}
