import type { ArtifactRef } from './stage-result.js';

/**
 * The review ledger: every finding a reviewer raised, with its state, so each review round re-checks the open
 * findings and the changes since the last round instead of starting over. Pure.
 *
 * A finding is identified by an id (`F1`, `F2`, …). In a later round the reviewer lists, in its `feedback`, the
 * findings that remain (starting with their id, or repeating their text) and any new ones; an open finding it
 * does not list again counts as fixed.
 */

export interface ReviewFinding {
  /** `F1`, `F2`, … in the order they were raised. */
  id: string;
  text: string;
  state: 'open' | 'fixed';
  raisedInRound: number;
  /** The last round whose feedback listed it. */
  lastSeenRound: number;
  fixedInRound?: number;
}

export interface ReviewLedger {
  reviewer: string;
  /** The last round recorded. */
  round: number;
  findings: ReviewFinding[];
}

/** A file a reworked stage changed since the reviewer's last round. */
export interface ArtifactChange {
  stage: string;
  path: string;
  change: 'added' | 'modified';
}

const ID_PREFIX = /^\s*\[?(F\d+)\]?\s*[:.)-]?\s*/;

/** Reads one feedback item (a string, or an object such as `{id?, title, description}`) as an id and a text. */
export function readFeedbackItem(item: unknown): { id?: string; text: string } {
  if (typeof item === 'string') {
    const match = ID_PREFIX.exec(item);
    return match ? { id: match[1], text: item.slice(match[0].length).trim() } : { text: item.trim() };
  }
  if (item !== null && typeof item === 'object') {
    const record = item as Record<string, unknown>;
    const id = typeof record.id === 'string' && /^F\d+$/.test(record.id) ? record.id : undefined;
    const title = ['title', 'summary', 'issue', 'message', 'text'].map((k) => record[k]).find((v) => typeof v === 'string');
    const description = typeof record.description === 'string' ? record.description : undefined;
    const text = [title, description].filter(Boolean).join(': ') || JSON.stringify(item);
    const where = typeof record.file_path === 'string' ? ` (${record.file_path})` : '';
    return { id, text: `${text}${where}` };
  }
  return { text: String(item) };
}

const normalize = (text: string): string => text.toLowerCase().replace(/\s+/g, ' ').trim();

/** Records one review round's feedback: listed findings stay (or become) open, unlisted open ones are fixed. */
export function recordReview(ledger: ReviewLedger | undefined, reviewer: string, round: number, feedback: readonly unknown[]): ReviewLedger {
  const findings = (ledger?.findings ?? []).map((f) => ({ ...f }));
  const seen = new Set<string>();
  for (const item of feedback) {
    const { id, text } = readFeedbackItem(item);
    const known = findings.find((f) => (id !== undefined && f.id === id) || normalize(f.text) === normalize(text));
    if (known) {
      Object.assign(known, { state: 'open', lastSeenRound: round, fixedInRound: undefined });
      seen.add(known.id);
    } else if (text) {
      const finding: ReviewFinding = { id: `F${findings.length + 1}`, text, state: 'open', raisedInRound: round, lastSeenRound: round };
      findings.push(finding);
      seen.add(finding.id);
    }
  }
  for (const finding of findings) {
    if (finding.state === 'open' && !seen.has(finding.id)) Object.assign(finding, { state: 'fixed', fixedInRound: round });
  }
  return { reviewer, round, findings };
}

/**
 * Files a stage's later round wrote that differ from its earlier round's, by path and hash. A file the later
 * round did not report is unchanged (a round reports what it wrote, not what it left alone).
 */
export function diffArtifacts(stage: string, before: readonly ArtifactRef[], after: readonly ArtifactRef[]): ArtifactChange[] {
  const old = new Map(before.map((a) => [a.path, a.sha256]));
  return after.flatMap((artifact): ArtifactChange[] => {
    const previous = old.get(artifact.path);
    if (previous === artifact.sha256) return [];
    return [{ stage, path: artifact.path, change: previous === undefined ? 'added' : 'modified' }];
  });
}

/** One list of a stage's artifacts over several activity calls of a round; a later call's entry for a path wins. */
export function mergeArtifacts(earlier: readonly ArtifactRef[], later: readonly ArtifactRef[]): ArtifactRef[] {
  const byPath = new Map(earlier.map((a) => [a.path, a]));
  for (const artifact of later) byPath.set(artifact.path, artifact);
  return [...byPath.values()];
}

function listFindings(findings: readonly ReviewFinding[]): string[] {
  return findings.map((f) =>
    f.state === 'open'
      ? `- ${f.id} (open, raised in round ${f.raisedInRound}): ${f.text}`
      : `- ${f.id} (fixed in round ${f.fixedInRound}): ${f.text}`,
  );
}

/** The message a reviewer resumes its session with in round `round` (≥ 2): the ledger and what changed. */
export function renderReviewerBrief(ledger: ReviewLedger, changes: readonly ArtifactChange[], round: number): string {
  return [
    `Review round ${round}. The work you reviewed in round ${ledger.round} was reworked after your feedback.`,
    'Re-review what changed instead of starting over.',
    '',
    'Findings so far:',
    ...(ledger.findings.length > 0 ? listFindings(ledger.findings) : ['- (none recorded)']),
    '',
    'Changed since your last review:',
    ...(changes.length > 0 ? changes.map((c) => `- ${c.path} (${c.change} by ${c.stage})`) : ['- no files changed']),
    '',
    'Check whether each open finding is fixed, and look at the changed files for new problems.',
    'Report your verdict again in the same JSON block. In "feedback", list only the findings that remain, each',
    'starting with its id (for example "F1: still no test for an empty name"), and any new ones; an open finding',
    'you do not list counts as fixed.',
  ].join('\n');
}

/** How a reworked stage is told to end its answer: again with its report block, or (`contract: none`) with the whole deliverable. */
const REWORK_ENDINGS = {
  json: 'Fix them in the workspace, then end with the same JSON report block as before.',
  // A `contract: none` answer is the deliverable itself: a report block asked for here would land in it.
  none: 'Fix them in the workspace, then give your whole answer again, revised: it replaces your earlier answer as the deliverable. Add no JSON report block.',
} as const;

/**
 * The message a reviewed stage resumes its session with, to address the reviewer's open findings.
 * @param contract the reworked stage's `contract` (how its answer must end)
 */
export function renderReworkBrief(ledger: ReviewLedger, reviewerSummary: string, round: number, contract: 'json' | 'none' = 'json'): string {
  const open = ledger.findings.filter((f) => f.state === 'open');
  return [
    `Rework (round ${round}): the reviewer "${ledger.reviewer}" asked for changes to your work.`,
    `Reviewer's summary: ${reviewerSummary}`,
    '',
    'Findings to address:',
    ...(open.length > 0 ? open.map((f) => `- ${f.id}: ${f.text}`) : ['- (the reviewer listed no findings; see the summary)']),
    '',
    REWORK_ENDINGS[contract],
  ].join('\n');
}
