/** Human output goes to stdout line by line; `--json` output is one JSON document. */
export function printLine(line = ''): void {
  process.stdout.write(`${line}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
