import { isMap, isNode, isScalar, LineCounter, parseDocument, Scalar, type Document } from 'yaml';

/*
 * Where a field of a pipeline file is: its line and column, or those of its nearest parent that the file has (a
 * missing field has no node, but the object that lacks it does). Pure; what the schema's problems (parse.ts) and
 * validate's later checks (library/pipeline-checks.ts) are located with, so both place a field alike.
 */

/** A place in a text. @unit 1-based line and column */
export interface TextPosition {
  line: number;
  column: number;
}

/** Finds where fields are in one pipeline file. */
export class FieldLocator {
  private readonly lines?: string[];

  constructor(
    private readonly doc: Document,
    private readonly lineCounter: LineCounter,
    text?: string,
  ) {
    this.lines = text?.split('\n');
  }

  /** A locator of `text`, parsed here. */
  static fromText(text: string): FieldLocator {
    const lineCounter = new LineCounter();
    return new FieldLocator(parseDocument(text, { lineCounter }), lineCounter, text);
  }

  /** Where character `offset` of the text is. */
  at(offset: number): TextPosition {
    const { line, col } = this.lineCounter.linePos(offset);
    return { line, column: col };
  }

  /** Where the field at `fieldPath` (keys and indexes) starts, or its nearest parent in the file. */
  position(fieldPath: readonly PropertyKey[]): TextPosition | undefined {
    for (let depth = fieldPath.length; depth >= 0; depth--) {
      const node = depth === 0 ? this.doc.contents : this.doc.getIn(fieldPath.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) return this.at(node.range[0]);
    }
    return undefined;
  }

  /** Where the key `key` of the mapping at `fieldPath` starts (an unknown field is shown at its own key), if it is there. */
  keyPosition(fieldPath: readonly PropertyKey[], key: string): TextPosition | undefined {
    const map = fieldPath.length === 0 ? this.doc.contents : this.doc.getIn(fieldPath as unknown[], true);
    if (!isMap(map)) return undefined;
    const pair = map.items.find((item) => (isScalar(item.key) ? String(item.key.value) : item.key) === key);
    const start = isNode(pair?.key) ? pair.key.range?.[0] : undefined;
    return start === undefined ? undefined : this.at(start);
  }

  /** The line of the field at `fieldPath`, or of its nearest parent in the file. */
  line(fieldPath: readonly PropertyKey[]): number | undefined {
    return this.position(fieldPath)?.line;
  }

  /** The line where a text field's value starts: the line after `|` or `>` for block scalars. */
  textLine(fieldPath: readonly PropertyKey[]): number | undefined {
    const node = this.doc.getIn(fieldPath as unknown[], true);
    const line = this.line(fieldPath);
    if (!isScalar(node) || line === undefined) return line;
    return node.type === Scalar.BLOCK_LITERAL || node.type === Scalar.BLOCK_FOLDED ? line + 1 : line;
  }

  /** The column where `text` first appears on line `line` (of a locator made from the text), if it does. */
  columnOf(line: number | undefined, text: string): number | undefined {
    const at = line === undefined ? -1 : (this.lines?.[line - 1]?.indexOf(text) ?? -1);
    return at < 0 ? undefined : at + 1;
  }
}
