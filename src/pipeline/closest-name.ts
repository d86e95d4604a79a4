/*
 * "Did you mean" for a misspelt name (`promt` for `prompt`): the known name fewest single-letter edits away, when it
 * is near enough to be what was meant. Pure, so the schema messages of the client, the worker and the library share it.
 */

/** At most this many edits, and fewer than half the name's letters: `id` → `if` is a guess, not a suggestion. */
const MAX_EDITS = 2;

/** The name of `known` closest to `name`, or undefined when none is near. Ties go to the first in `known`. */
export function findClosestName(name: string, known: readonly string[]): string | undefined {
  let best: { name: string; edits: number } | undefined;
  for (const candidate of known) {
    const edits = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (edits > MAX_EDITS || edits * 2 >= Math.max(name.length, candidate.length)) continue;
    if (!best || edits < best.edits) best = { name: candidate, edits };
  }
  return best?.name;
}

/** Insertions, deletions, substitutions and swaps of two neighbouring letters (`pormpt`) each count as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
    }
  }
  return rows[a.length][b.length];
}
