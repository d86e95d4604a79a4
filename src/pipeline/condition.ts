/**
 * `when:` conditions on earlier stages' outputs, e.g. `{{stages.test.outputs.passed}} == false`. Pure.
 *
 * Grammar: `a || b`, `a && b`, `!a`, `a == b`, `a != b`, parentheses; operands are references
 * (`{{stages.ID.outputs.KEY}}`, `{{stages.ID.summary}}`, `{{stages.ID.status}}`, `{{inputs.NAME}}`) or literals
 * (`true`, `false`, `null`, numbers, 'quoted' or "quoted" strings). A lone operand is tested for truthiness.
 */

export type ConditionNode =
  | { kind: 'ref'; path: string[] }
  | { kind: 'literal'; value: string | number | boolean | null }
  | { kind: 'not'; operand: ConditionNode }
  | { kind: 'compare'; op: '==' | '!='; left: ConditionNode; right: ConditionNode }
  | { kind: 'logic'; op: '&&' | '||'; left: ConditionNode; right: ConditionNode };

/** What a condition can see: earlier stages (outputs, summary, status) and the run's inputs. */
export interface ConditionContext {
  inputs: Record<string, string>;
  stages: Record<string, { status: string; summary?: string; outputs?: Record<string, unknown>; report?: Record<string, unknown> }>;
}

/** Thrown when a `when:` expression cannot be parsed; the message shows where. */
export class ConditionSyntaxError extends Error {
  override readonly name = 'ConditionSyntaxError';
  constructor(
    readonly expression: string,
    readonly position: number,
    problem: string,
  ) {
    super(`${problem} at column ${position + 1} of \`${expression}\``);
  }
}

type Token = { type: 'ref' | 'string' | 'number' | 'word' | 'op' | 'paren'; text: string; at: number; path?: string[] };

const TOKEN = /\s*(?:(\{\{\s*([A-Za-z0-9_.-]+)\s*\}\})|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(-?\d+(?:\.\d+)?)(?![\w.])|([A-Za-z_][\w-]*)|(==|!=|&&|\|\||!)|([()]))/y;

function tokenize(expression: string): Token[] {
  const tokens: Token[] = [];
  TOKEN.lastIndex = 0;
  let at = 0;
  while (at < expression.length) {
    if (/^\s*$/.test(expression.slice(at))) break;
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(expression);
    if (!m) {
      const where = at + (expression.slice(at).length - expression.slice(at).trimStart().length);
      throw new ConditionSyntaxError(expression, where, `unexpected \`${expression.slice(where, where + 12)}\``);
    }
    const start = m.index + m[0].length - m[0].trimStart().length;
    if (m[1]) tokens.push({ type: 'ref', text: m[1], at: start, path: m[2].split('.') });
    else if (m[3]) tokens.push({ type: 'string', text: m[3].slice(1, -1).replace(/\\(.)/g, '$1'), at: start });
    else if (m[4]) tokens.push({ type: 'number', text: m[4], at: start });
    else if (m[5]) tokens.push({ type: 'word', text: m[5], at: start });
    else if (m[6]) tokens.push({ type: 'op', text: m[6], at: start });
    else tokens.push({ type: 'paren', text: m[7], at: start });
    at = TOKEN.lastIndex;
  }
  return tokens;
}

/**
 * Parses a `when:` expression.
 * @throws ConditionSyntaxError naming the column and what was expected.
 */
export function parseCondition(expression: string): ConditionNode {
  const tokens = tokenize(expression);
  let i = 0;
  const peek = (): Token | undefined => tokens[i];
  const fail = (problem: string): never => {
    throw new ConditionSyntaxError(expression, peek()?.at ?? expression.length, problem);
  };
  const logic = (op: '&&' | '||', next: () => ConditionNode): ConditionNode => {
    let left = next();
    while (peek()?.type === 'op' && peek()?.text === op) {
      i++;
      left = { kind: 'logic', op, left, right: next() };
    }
    return left;
  };
  const isComparison = (token: Token | undefined): token is Token & { text: '==' | '!=' } =>
    token?.type === 'op' && (token.text === '==' || token.text === '!=');
  const primary = (): ConditionNode => {
    const token = tokens[i++];
    if (!token) return fail('expected a value, a {{reference}} or "("');
    if (token.type === 'op' && token.text === '!') return { kind: 'not', operand: primary() };
    if (token.type === 'paren' && token.text === '(') {
      const inner = or();
      if (peek()?.text !== ')') fail('expected ")"');
      i++;
      return inner;
    }
    if (token.type === 'ref') return referenceNode(expression, token);
    if (token.type === 'string') return { kind: 'literal', value: token.text };
    if (token.type === 'number') return { kind: 'literal', value: Number(token.text) };
    if (token.type === 'word') {
      if (token.text === 'true' || token.text === 'false') return { kind: 'literal', value: token.text === 'true' };
      if (token.text === 'null') return { kind: 'literal', value: null };
      throw new ConditionSyntaxError(expression, token.at, `unquoted word \`${token.text}\`; quote strings ('${token.text}') or use {{...}} for a reference`);
    }
    i--;
    return fail(`unexpected \`${token.text}\``);
  };
  const comparison = (): ConditionNode => {
    const left = primary();
    const op = peek();
    if (!isComparison(op)) return left;
    i++;
    const node: ConditionNode = { kind: 'compare', op: op.text, left, right: primary() };
    if (isComparison(peek())) fail('chained comparisons need parentheses');
    return node;
  };
  const and = (): ConditionNode => logic('&&', comparison);
  const or = (): ConditionNode => logic('||', and);
  if (tokens.length === 0) fail('empty condition');
  const node = or();
  if (i < tokens.length) fail(`unexpected \`${tokens[i].text}\` (join conditions with && or ||)`);
  return node;
}

function referenceNode(expression: string, token: Token): ConditionNode {
  const path = token.path!;
  const valid =
    (path[0] === 'inputs' && path.length === 2) ||
    (path[0] === 'stages' && path.length >= 3 && (path[2] === 'outputs' || path[2] === 'report' ? path.length >= 4 : path.length === 3 && ['summary', 'status'].includes(path[2])));
  if (!valid) {
    throw new ConditionSyntaxError(
      expression,
      token.at,
      `cannot refer to {{${path.join('.')}}}; use {{stages.ID.outputs.KEY}}, {{stages.ID.report.FIELD}}, {{stages.ID.summary}}, {{stages.ID.status}} or {{inputs.NAME}}`,
    );
  }
  return { kind: 'ref', path };
}

/** Every `{{…}}` reference in a condition, as paths (`['stages', 'test', 'outputs', 'passed']`). */
export function listConditionReferences(node: ConditionNode): string[][] {
  switch (node.kind) {
    case 'ref':
      return [node.path];
    case 'literal':
      return [];
    case 'not':
      return listConditionReferences(node.operand);
    default:
      return [...listConditionReferences(node.left), ...listConditionReferences(node.right)];
  }
}

/** Evaluates a parsed condition; a missing stage, output or input reads as `null`. */
export function evaluateCondition(node: ConditionNode, context: ConditionContext): boolean {
  return isTruthy(valueOf(node, context));
}

function valueOf(node: ConditionNode, context: ConditionContext): unknown {
  switch (node.kind) {
    case 'literal':
      return node.value;
    case 'ref':
      return resolveReference(node.path, context);
    case 'not':
      return !isTruthy(valueOf(node.operand, context));
    case 'compare': {
      const same = looselyEqual(valueOf(node.left, context), valueOf(node.right, context));
      return node.op === '==' ? same : !same;
    }
    case 'logic':
      return node.op === '&&'
        ? isTruthy(valueOf(node.left, context)) && isTruthy(valueOf(node.right, context))
        : isTruthy(valueOf(node.left, context)) || isTruthy(valueOf(node.right, context));
  }
}

function resolveReference(path: string[], context: ConditionContext): unknown {
  let value: unknown = path[0] === 'inputs' ? context.inputs : context.stages;
  for (const part of path.slice(1)) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) return null;
    value = (value as Record<string, unknown>)[part];
  }
  return value ?? null;
}

/** Outputs come from JSON and inputs are strings, so `"false" == false` and `"3" == 3` hold. */
function looselyEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null) return false;
  if (typeof a === 'object' || typeof b === 'object') return JSON.stringify(a) === JSON.stringify(b);
  return String(a) === String(b);
}

/** `false`, `null`, `0`, `""`, `"false"`, `"0"` and empty lists are false; everything else is true. */
export function isTruthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'string') return value !== '' && value !== 'false' && value !== '0';
  return Boolean(value);
}
