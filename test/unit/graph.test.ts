import { describe, expect, test } from 'vitest';
import { findAncestors, findGraphProblems, findReadyStages, findReworkStages } from '../../src/pipeline/graph.js';
import { parsePipeline } from '../../src/pipeline/parse.js';

// spec -> implement -> test -> review -> release, with docs beside test (needs implement only).
const stages = [
  { id: 'spec' },
  { id: 'implement', needs: ['spec'] },
  { id: 'test', needs: ['implement'] },
  { id: 'docs', needs: ['implement'] },
  { id: 'review', needs: ['test'] },
  { id: 'release', needs: ['review', 'docs'] },
];

describe('stage graph', () => {
  test('finds stages whose needs are satisfied, in file order', () => {
    const satisfied = new Set(['spec', 'implement']);
    const started = new Set(['spec', 'implement']);
    expect(findReadyStages(stages, (id) => started.has(id), (id) => satisfied.has(id))).toEqual(['test', 'docs']);
  });

  test('finds ancestors through other stages', () => {
    expect([...findAncestors(stages, 'review')].sort()).toEqual(['implement', 'spec', 'test']);
  });

  test('a rework runs the reviewed stage, the stages between it and the reviewer, and the reviewer', () => {
    expect(findReworkStages(stages, 'review', ['implement'])).toEqual(['implement', 'test', 'review']);
    expect(findReworkStages(stages, 'review', ['test'])).toEqual(['test', 'review']);
  });

  test('reports cycles and unknown needs', () => {
    expect(findGraphProblems([{ id: 'a', needs: ['b'] }, { id: 'b', needs: ['a'] }])[0].message).toBe('dependency cycle: a -> b -> a');
    expect(findGraphProblems([{ id: 'a', needs: ['x'] }])[0].message).toContain('unknown stage "x"');
  });
});

describe('review checks at load time', () => {
  const pipeline = (review: string, needs = '[implement]'): string =>
    ['name: p', 'stages:', '  - id: implement', '    prompt: do it', '  - id: other', '    prompt: other', '  - id: review', `    needs: ${needs}`, '    prompt: review it', `    review: ${review}`].join('\n');

  test('accepts a reviewer of a stage it runs after', () => {
    expect(parsePipeline(pipeline('{ of: implement, maxRounds: 2 }'), 'p.yaml').stages[2].review?.maxRounds).toBe(2);
  });

  test.each([
    ['{ of: other }', 'stages[2].review.of: stage "review" reviews "other" but does not run after it; add "other" (or a stage that needs it) to its needs'],
    ['{ of: missing }', 'unknown stage "missing"; known stages: implement, other, review'],
    ['{ of: review }', 'stage "review" cannot review itself'],
  ])('rejects review %s', (review, message) => {
    expect(() => parsePipeline(pipeline(review), 'p.yaml')).toThrow(message);
  });

  test('an approval timeout policy needs a timeout', () => {
    const text = ['name: p', 'stages:', '  - id: gate', '    approval: { onTimeout: approve }'].join('\n');
    expect(() => parsePipeline(text, 'p.yaml')).toThrow('stages[0].approval.onTimeout: onTimeout needs a timeout');
  });
});
