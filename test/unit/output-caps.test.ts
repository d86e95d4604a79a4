import { describe, expect, test } from 'vitest';
import { capArtifacts, capText, describeOmittedArtifacts, findOversizedField, OUTPUT_CAPS } from '../../src/pipeline/output-caps.js';
import { MAX_FINALLY_STAGES, MAX_STAGES } from '../../src/pipeline/schema.js';
import { pipelineProblems } from '../helpers/pipeline-problems.js';

const linear = (count: number, extra = ''): string =>
  `name: big\nstages:\n${Array.from({ length: count }, (_, i) => `  - { id: s${i + 1}, prompt: "step ${i + 1}"${i ? `, needs: [s${i}]` : ''} }`).join('\n')}\n${extra}`;

describe('the number of stages', () => {
  test(`a pipeline of ${MAX_STAGES} stages is valid, and one more is refused naming the field and the limit`, () => {
    const started = Date.now();
    expect(pipelineProblems(linear(MAX_STAGES))).toEqual([]);
    // Validation stays quick at the limit (a linear graph is the worst case for ancestor checks).
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(pipelineProblems(linear(MAX_STAGES + 1))).toEqual([
      `stages: a pipeline may have at most ${MAX_STAGES} stages; split the work into several pipelines, or give one stage a list of items to work through`,
    ]);
  });

  test('so do finally stages, with their own limit', () => {
    const finallyStages = `finally:\n${Array.from({ length: MAX_FINALLY_STAGES + 1 }, (_, i) => `  - { id: f${i}, prompt: "clean ${i}" }`).join('\n')}\n`;
    expect(pipelineProblems(linear(1, finallyStages))).toEqual([`finally: a pipeline may have at most ${MAX_FINALLY_STAGES} finally stages; fold the clean-up into fewer stages`]);
  });
});

describe('caps on an answer', () => {
  test('prose over its cap is cut inside the limit, never inside a character, and says so', () => {
    const text = 'é'.repeat(OUTPUT_CAPS.summaryBytes);
    const capped = capText(text);
    expect(capped.cut).toBe(true);
    expect(capped.bytes).toBe(2 * OUTPUT_CAPS.summaryBytes);
    expect(new TextEncoder().encode(capped.text).byteLength).toBeLessThanOrEqual(OUTPUT_CAPS.summaryBytes);
    expect(capped.text).toMatch(/^é+ … \[cut: 32768 bytes, over the 16 KB limit; the full text is in the transcript\]$/);
    expect(capText('short')).toEqual({ text: 'short', cut: false, bytes: 5 });
  });

  test('an output, all outputs together or the feedback over its cap is named with its size and limit', () => {
    expect(findOversizedField({ outputs: { ok: 'x'.repeat(1000), report: 'y'.repeat(OUTPUT_CAPS.outputBytes + 1) } })).toEqual({ field: 'outputs.report', bytes: OUTPUT_CAPS.outputBytes + 1, limit: OUTPUT_CAPS.outputBytes });
    const five = Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`part${i}`, 'z'.repeat(60_000)]));
    expect(findOversizedField({ outputs: five })).toMatchObject({ field: 'outputs', limit: OUTPUT_CAPS.outputsBytes });
    expect(findOversizedField({ outputs: {}, feedback: [{ text: 'f'.repeat(OUTPUT_CAPS.feedbackBytes) }] })).toMatchObject({ field: 'feedback', limit: OUTPUT_CAPS.feedbackBytes });
    // A structured output counts as its JSON text.
    expect(findOversizedField({ outputs: { list: Array.from({ length: 10_000 }, (_, i) => `item-${i}`) } })).toMatchObject({ field: 'outputs.list' });
    expect(findOversizedField({ outputs: { a: 'fine' }, feedback: ['fine'] })).toBeUndefined();
  });
});

describe('the artifact list', () => {
  const file = (p: string) => ({ path: p, bytes: 10 });

  test('lists the first files up to the limit and counts the rest by top folder, the largest first', () => {
    const files = [...Array.from({ length: 5 }, (_, i) => file(`a${i}.md`)), ...Array.from({ length: 7 }, (_, i) => file(`.venv/lib/x${i}.py`)), file('build/out.js'), file('z.txt')];
    const { listed, omitted } = capArtifacts(files, 5);
    expect(listed.map((a) => a.path)).toEqual(['a0.md', 'a1.md', 'a2.md', 'a3.md', 'a4.md']);
    expect(omitted).toEqual({ count: 9, bytes: 90, byFolder: { '.venv/': 7, './': 1, 'build/': 1 } });
    expect(describeOmittedArtifacts(omitted!)).toBe('9 more files (1 KB): .venv/ 7, ./ 1, build/ 1');
    expect(capArtifacts(files, 100)).toEqual({ listed: files });
  });

  test('names at most twenty folders and adds up the others', () => {
    const files = Array.from({ length: 30 }, (_, i) => file(`dir${String(i).padStart(2, '0')}/f`));
    const { omitted } = capArtifacts(files, 0);
    expect(Object.keys(omitted!.byFolder)).toHaveLength(21);
    expect(omitted!.byFolder['(other folders)']).toBe(10);
  });
});
