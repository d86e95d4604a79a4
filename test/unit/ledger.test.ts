import { describe, expect, test } from 'vitest';
import { diffArtifacts, mergeArtifacts, readFeedbackItem, recordReview, renderReviewerBrief, renderReworkBrief } from '../../src/pipeline/review-ledger.js';

describe('review ledger', () => {
  test('numbers new findings and closes the ones a later round does not list again', () => {
    const round1 = recordReview(undefined, 'review', 1, ['Missing test for an empty name', { title: 'No usage text', file_path: 'src/greet.js' }]);
    expect(round1.findings.map((f) => [f.id, f.state, f.text])).toEqual([
      ['F1', 'open', 'Missing test for an empty name'],
      ['F2', 'open', 'No usage text (src/greet.js)'],
    ]);
    const round2 = recordReview(round1, 'review', 2, ['F2: still no usage text', 'Typo in the README']);
    expect(round2.findings.map((f) => [f.id, f.state, f.fixedInRound, f.lastSeenRound])).toEqual([
      ['F1', 'fixed', 2, 1],
      ['F2', 'open', undefined, 2],
      ['F3', 'open', undefined, 2],
    ]);
    const round3 = recordReview(round2, 'review', 3, []);
    expect(round3.findings.every((f) => f.state === 'fixed')).toBe(true);
  });

  test('matches a repeated finding by its text, and reopens a fixed one', () => {
    const round1 = recordReview(undefined, 'review', 1, ['Handle   the empty name']);
    const round2 = recordReview(round1, 'review', 2, []);
    const round3 = recordReview(round2, 'review', 3, ['handle the empty name']);
    expect(round3.findings).toEqual([{ id: 'F1', text: 'Handle   the empty name', state: 'open', raisedInRound: 1, lastSeenRound: 3, fixedInRound: undefined }]);
  });

  test('reads ids from strings and objects', () => {
    expect(readFeedbackItem('[F3] still broken')).toEqual({ id: 'F3', text: 'still broken' });
    expect(readFeedbackItem({ id: 'F1', title: 'Bug', description: 'crashes' })).toEqual({ id: 'F1', text: 'Bug: crashes' });
    expect(readFeedbackItem(42)).toEqual({ text: '42' });
  });

  test('diffs artifacts by path and hash', () => {
    const before = [{ path: 'a.js', bytes: 1, sha256: 'x' }, { path: 'b.js', bytes: 1, sha256: 'y' }, { path: 'c.js', bytes: 1, sha256: 'z' }];
    const after = [{ path: 'a.js', bytes: 1, sha256: 'x' }, { path: 'b.js', bytes: 2, sha256: 'y2' }, { path: 'd.js', bytes: 1, sha256: 'w' }];
    expect(diffArtifacts('implement', before, after)).toEqual([
      { stage: 'implement', path: 'b.js', change: 'modified' },
      { stage: 'implement', path: 'd.js', change: 'added' },
    ]);
  });

  test('merges the artifacts of several calls in one round, the later call winning', () => {
    const merged = mergeArtifacts([{ path: 'a', bytes: 1, sha256: 'x' }, { path: 'b', bytes: 1, sha256: 'y' }], [{ path: 'b', bytes: 2, sha256: 'y2' }]);
    expect(merged).toEqual([{ path: 'a', bytes: 1, sha256: 'x' }, { path: 'b', bytes: 2, sha256: 'y2' }]);
  });

  test('briefs the reviewer with the ledger and the changes, and the worker with the open findings', () => {
    const ledger = recordReview(recordReview(undefined, 'review', 1, ['No test', 'No docs']), 'review', 2, ['F2: still no docs']);
    const brief = renderReviewerBrief(ledger, [{ stage: 'implement', path: 'test/greet.test.js', change: 'added' }], 3);
    expect(brief).toContain('Review round 3. The work you reviewed in round 2 was reworked');
    expect(brief).toContain('- F1 (fixed in round 2): No test');
    expect(brief).toContain('- F2 (open, raised in round 1): No docs');
    expect(brief).toContain('- test/greet.test.js (added by implement)');
    const rework = renderReworkBrief(ledger, 'Docs are missing.', 3);
    expect(rework).toContain('Rework (round 3): the reviewer "review" asked for changes');
    expect(rework).toContain('- F2: No docs');
    expect(rework).not.toContain('F1');
  });
});
